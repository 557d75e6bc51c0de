import Synchronization

/// Writes to the shared tiers, each made by a task of its own, so that no answer waits for
/// them. Their bodies are held in memory until they are made: past a backlog of
/// `largestBacklog` bytes, a write is dropped rather than started, since a cache
/// may always forget. An invalidation waits for the writes to its URL in flight
/// (``waitForWrites(to:)``), so that none lands after it.
final class SharedWrites: Sendable {
    private struct State {
        var backlog = 0
        var nextID = 0
        /// The writes in flight, by the URL they store, by their number.
        var inFlight: [String: [Int: Task<Void, Never>]] = [:]
        /// How many tasks wait in ``waitForWrites(to:)``.
        var waiters = 0
    }

    private let state = Mutex(State())
    private let pending: PendingWork
    private let largestBacklog: Int

    /// Makes a queue whose writes count in `pending` from being started until made.
    init(counting pending: PendingWork, largestBacklog: Int) {
        self.pending = pending
        self.largestBacklog = largestBacklog
    }

    /// Starts `write` of `key`'s responses, which holds `bytes`, unless the writes in flight
    /// hold too much already; returns whether it started it.
    @discardableResult
    func enqueue(key: String, bytes: Int, _ write: @escaping @Sendable () async -> Void) -> Bool {
        self.state.withLock { state in
            // One write is always started, however large, so that a lone large body is shared.
            guard state.backlog == 0 || state.backlog + bytes <= self.largestBacklog else { return false }
            state.backlog += bytes
            state.nextID += 1
            let id = state.nextID
            self.pending.begin()
            // Made under the lock, which its own removal takes: it cannot end before it is added.
            state.inFlight[key, default: [:]][id] = Task(priority: .background) {
                await write()
                self.state.withLock { state in
                    state.backlog -= bytes
                    state.inFlight[key]?[id] = nil
                    if state.inFlight[key]?.isEmpty == true { state.inFlight[key] = nil }
                }
                self.pending.end()
            }
            return true
        }
    }

    /// Waits until the writes of `key` (of every key, if `nil`) started before this call are made.
    func waitForWrites(to key: String?) async {
        let writes = self.state.withLock { state in
            state.waiters += 1
            guard let key else { return state.inFlight.values.flatMap(\.values) }
            return Array(state.inFlight[key, default: [:]].values)
        }
        for write in writes { await write.value }
        self.state.withLock { $0.waiters -= 1 }
    }

    /// How many tasks wait for writes to be made.
    var waiterCount: Int {
        self.state.withLock { $0.waiters }
    }
}
