import NIOCore
import Synchronization

/// The open connections of a server, whether each is answering a request, and whether the
/// server is shutting down: what shutdown needs to close idle connections at once and busy
/// ones after their response.
final class ConnectionRegistry: Sendable {
    private struct State {
        var connections: [ObjectIdentifier: (channel: any Channel, isBusy: Bool)] = [:]
        var isShuttingDown = false
    }

    private let state = Mutex(State())
    private let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// Adds `channel`; `false` if the server is at its limit or shutting down.
    func admit(_ channel: any Channel) -> Bool {
        self.state.withLock { state in
            guard !state.isShuttingDown, state.connections.count < self.limit else { return false }
            state.connections[ObjectIdentifier(channel)] = (channel, false)
            return true
        }
    }

    /// Marks the connection busy or idle; `false` if it should close instead: the server is
    /// shutting down.
    func setBusy(_ id: ObjectIdentifier, _ isBusy: Bool) -> Bool {
        self.state.withLock { state in
            guard !state.isShuttingDown else { return false }
            state.connections[id]?.isBusy = isBusy
            return true
        }
    }

    /// Whether the server is shutting down.
    var isShuttingDown: Bool {
        self.state.withLock { $0.isShuttingDown }
    }

    func remove(_ id: ObjectIdentifier) {
        _ = self.state.withLock { $0.connections.removeValue(forKey: id) }
    }

    /// Begins shutdown: idle connections close now; busy ones close after their response.
    func shutDown() {
        let idle = self.state.withLock { state in
            state.isShuttingDown = true
            return state.connections.values.filter { !$0.isBusy }.map(\.channel)
        }
        for channel in idle { channel.close(promise: nil) }
    }

    /// Closes every connection still open, busy or not.
    func closeAll() {
        for channel in self.state.withLock({ $0.connections.values.map(\.channel) }) { channel.close(promise: nil) }
    }
}
