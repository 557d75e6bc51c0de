import NIOCore
import NIOEmbedded
import Testing

@testable import CachalotNIO

@Suite("OriginPool")
struct OriginPoolTests {
    static let origin = OriginPool.Origin(isSecure: false, host: "127.0.0.1", port: 8080)

    /// An open connection on an event loop of its own.
    static func connection() async throws -> OriginConnection {
        let handler = OriginExchangeHandler()
        let channel = EmbeddedChannel(handler: handler)
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).get()
        return OriginConnection(channel: channel, handler: handler)
    }

    @Test("A connection on the loop asked for is taken before newer ones; without a loop, the newest")
    func takesTheLoopsConnection() async throws {
        let pool = OriginPool(maximumIdlePerOrigin: 4)
        let older = try await Self.connection()
        let newer = try await Self.connection()
        let newest = try await Self.connection()
        for connection in [older, newer, newest] { pool.put(connection, for: Self.origin) }
        #expect(pool.take(Self.origin, preferring: older.channel.eventLoop) === older)
        #expect(pool.take(Self.origin) === newest)
        // A loop with no idle connection takes the newest left.
        #expect(pool.take(Self.origin, preferring: older.channel.eventLoop) === newer)
        #expect(pool.take(Self.origin) == nil)
    }

    @Test("A closed connection on the loop asked for is passed over, and closed ones are dropped")
    func passesOverClosed() async throws {
        let pool = OriginPool(maximumIdlePerOrigin: 4)
        let (open, closed) = (try await Self.connection(), try await Self.connection())
        for connection in [open, closed] { pool.put(connection, for: Self.origin) }
        try await closed.channel.close()
        #expect(pool.take(Self.origin, preferring: closed.channel.eventLoop) === open)
        #expect(pool.take(Self.origin) == nil)
    }
}
