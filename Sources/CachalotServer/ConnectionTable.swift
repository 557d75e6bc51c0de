/// Which connections a listener holds, whether each is answering a request, and which to close
/// to admit another: the decisions of a ``ConnectionRegistry``, as a value that returns what to
/// do and does nothing itself.
///
/// A connection is idle from when it is admitted until its request head is read, and again from
/// the end of each response until the next head: a keep-alive connection waiting for a request,
/// or a new one that has not sent one yet. At its limit the table admits a new connection in
/// place of the one idle the longest, as nginx reuses its oldest idle connections and Varnish
/// closes idle sessions when short of them; only when none is idle is the new one refused.
struct ConnectionTable<ID: Hashable, Connection> {
    private struct Entry {
        var connection: Connection
        /// When the connection became idle, in ``clock`` ticks; `nil` while it answers a request.
        var idleSince: UInt64?
    }

    /// What to do with a connection that arrives.
    enum Admission {
        /// Serve it.
        case admit
        /// Serve it, and close this connection, idle the longest, which the table no longer holds.
        case admitClosing(Connection)
        /// Close it at once: the table is full of busy connections, or shutting down.
        case refuse
    }

    private var entries: [ID: Entry] = [:]
    /// A counter that orders idle times.
    private var clock: UInt64 = 0
    /// The most connections held at once.
    let limit: Int
    /// Whether shutdown has begun: no connection is admitted, and none may start a request.
    private(set) var isShuttingDown = false

    init(limit: Int) {
        self.limit = limit
    }

    /// The number of connections held.
    var count: Int { self.entries.count }

    /// Every connection held, busy or not.
    var connections: [Connection] { self.entries.values.map(\.connection) }

    /// Admits `connection` under `id`, idle, if there is room, or room made by closing the
    /// connection idle the longest.
    ///
    /// - Complexity: O(1) below the limit; O(*n*) at it, for *n* connections held.
    mutating func admit(_ id: ID, _ connection: Connection) -> Admission {
        guard !self.isShuttingDown else { return .refuse }
        var admission = Admission.admit
        if self.entries.count >= self.limit {
            let oldest = self.entries.lazy.compactMap { id, entry in entry.idleSince.map { (id, $0) } }
                .min { $0.1 < $1.1 }
            guard let oldestID = oldest?.0, let closed = self.entries.removeValue(forKey: oldestID) else {
                return .refuse
            }
            admission = .admitClosing(closed.connection)
        }
        self.entries[id] = Entry(connection: connection, idleSince: self.tick())
        return admission
    }

    /// Marks the connection busy (its request head was read) or idle (its response ended);
    /// `false` if it should close instead: shutdown has begun, or the table closed it to admit
    /// another.
    mutating func setBusy(_ id: ID, _ isBusy: Bool) -> Bool {
        guard !self.isShuttingDown, self.entries[id] != nil else { return false }
        let idleSince = isBusy ? nil : self.tick()
        self.entries[id]?.idleSince = idleSince
        return true
    }

    /// Forgets a connection that closed.
    mutating func remove(_ id: ID) {
        self.entries.removeValue(forKey: id)
    }

    /// Begins shutdown; returns the idle connections, to close now (busy ones close after their
    /// response, when ``setBusy(_:_:)`` says so).
    mutating func shutDown() -> [Connection] {
        self.isShuttingDown = true
        return self.entries.values.filter { $0.idleSince != nil }.map(\.connection)
    }

    private mutating func tick() -> UInt64 {
        self.clock += 1
        return self.clock
    }
}
