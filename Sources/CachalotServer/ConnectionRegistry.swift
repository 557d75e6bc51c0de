import NIOCore
import Synchronization

/// The open connections of a listener, whether each is answering a request, and whether the
/// server is shutting down: what shutdown needs to close idle connections at once and busy
/// ones after their response. The decisions are a ``ConnectionTable``'s; this shell closes the
/// connections it names.
final class ConnectionRegistry: Sendable {
    private let table: Mutex<ConnectionTable<ObjectIdentifier, any Channel>>

    init(limit: Int) {
        self.table = Mutex(ConnectionTable(limit: limit))
    }

    /// Adds `channel`, closing the connection idle the longest if the listener is at its limit;
    /// `false` if every connection is busy, or the server is shutting down.
    func admit(_ channel: any Channel) -> Bool {
        switch self.table.withLock({ $0.admit(ObjectIdentifier(channel), channel) }) {
        case .admit:
            return true
        case .admitClosing(let idle):
            idle.close(promise: nil)
            return true
        case .refuse:
            return false
        }
    }

    /// Marks the connection busy or idle; `false` if it should close instead: the server is
    /// shutting down, or the connection was closed to admit another.
    func setBusy(_ id: ObjectIdentifier, _ isBusy: Bool) -> Bool {
        self.table.withLock { $0.setBusy(id, isBusy) }
    }

    /// Whether the server is shutting down.
    var isShuttingDown: Bool {
        self.table.withLock { $0.isShuttingDown }
    }

    func remove(_ id: ObjectIdentifier) {
        self.table.withLock { $0.remove(id) }
    }

    /// Begins shutdown: idle connections close now; busy ones close after their response.
    func shutDown() {
        for channel in self.table.withLock({ $0.shutDown() }) { channel.close(promise: nil) }
    }

    /// Closes every connection still open, busy or not.
    func closeAll() {
        for channel in self.table.withLock({ $0.connections }) { channel.close(promise: nil) }
    }
}
