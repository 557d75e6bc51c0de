import NIOCore
import Synchronization

/// The idle kept-alive connections of a transport, by origin: the newest is reused first, so
/// that the older ones time out at their origin and are seen to close.
final class OriginPool: Sendable {
    /// An origin: the scheme, host and port a connection is made to.
    struct Origin: Hashable, Sendable {
        var isSecure: Bool
        var host: String
        var port: Int
    }

    private struct State {
        var idle: [Origin: [OriginConnection]] = [:]
        var isShutDown = false
    }

    private let state = Mutex(State())
    private let maximumIdlePerOrigin: Int

    init(maximumIdlePerOrigin: Int) {
        self.maximumIdlePerOrigin = maximumIdlePerOrigin
    }

    /// An idle connection to `origin`, taken out of the pool; `nil` if none is open.
    ///
    /// The newest on `loop` if there is one there (so that a request sent from a loop's task
    /// crosses no thread to reach its origin), else the newest of all.
    func take(_ origin: Origin, preferring loop: (any EventLoop)? = nil) -> OriginConnection? {
        var closed: [OriginConnection] = []
        let found = self.state.withLock { state -> OriginConnection? in
            guard var connections = state.idle[origin] else { return nil }
            defer { state.idle[origin] = connections }
            if let loop, let index = connections.lastIndex(where: { $0.channel.eventLoop === loop && $0.isOpen }) {
                return connections.remove(at: index)
            }
            while let connection = connections.popLast() {
                if connection.isOpen { return connection }
                closed.append(connection)
            }
            return nil
        }
        for connection in closed { connection.close() }
        return found
    }

    /// Puts `connection` back as idle; it is closed instead if the pool holds enough for its
    /// origin, or is shut down.
    func put(_ connection: OriginConnection, for origin: Origin) {
        let isKept = self.state.withLock { state -> Bool in
            guard !state.isShutDown else { return false }
            var connections = state.idle[origin, default: []]
            connections.removeAll { !$0.isOpen }
            guard connections.count < self.maximumIdlePerOrigin else {
                state.idle[origin] = connections
                return false
            }
            connections.append(connection)
            state.idle[origin] = connections
            return true
        }
        if !isKept { connection.close() }
    }

    /// Closes every idle connection; connections still in an exchange close when it ends.
    func shutDown() {
        let idle = self.state.withLock { state in
            state.isShutDown = true
            defer { state.idle = [:] }
            return state.idle.values.flatMap { $0 }
        }
        for connection in idle { connection.close() }
    }
}
