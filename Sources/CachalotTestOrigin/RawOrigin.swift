import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// An origin on 127.0.0.1 that answers each request with bytes a test scripts, sent as they
/// are: malformed status lines and fields, wrong lengths, broken chunking, bodies that never
/// end. No HTTP library would send these; a cache must survive them all.
///
/// ```swift
/// let origin = try await RawOrigin.start { _ in .init("HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nhi") }
/// defer { origin.stop() }
/// ```
public final class RawOrigin: Sendable {
    /// One scripted answer.
    public struct Reply: Sendable {
        /// The bytes sent as soon as the request's head has arrived. No default.
        public var bytes: Data
        /// After the bytes, sends `piece` this many times more (0 for none), then closes: a body
        /// of any length without holding it in memory. Default: `nil`.
        public var repeating: (piece: Data, count: Int)?
        /// Keeps the connection open after sending, until the client closes it: a body that
        /// stalls. Default: `false`.
        public var staysOpen = false
        /// Reads the next request on the same connection after sending: a keep-alive
        /// connection. An empty reply to that request then closes it unanswered, as an origin
        /// that closes an idle connection just as the client reuses it. Default: `false`.
        public var keepsServing = false

        /// Creates an answer of `text`'s UTF-8 bytes.
        ///
        /// - Parameters:
        ///   - text: The whole answer, status line and all.
        ///   - staysOpen: Whether the connection stays open after it. Default: `false`.
        public init(_ text: String, staysOpen: Bool = false) {
            self.bytes = Data(text.utf8)
            self.staysOpen = staysOpen
        }

        /// Creates an answer of `bytes`.
        ///
        /// - Parameters:
        ///   - bytes: The first bytes sent.
        ///   - repeating: A piece sent this many times after them. Default: `nil`, none.
        ///   - staysOpen: Whether the connection stays open after it. Default: `false`.
        public init(bytes: Data, repeating: (piece: Data, count: Int)? = nil, staysOpen: Bool = false) {
            self.bytes = bytes
            self.repeating = repeating
            self.staysOpen = staysOpen
        }
    }

    /// The port it listens on.
    public let port: Int
    private let listener: any Channel
    private let connections = Mutex<[any Channel]>([])
    private let received = Mutex<[String]>([])

    private init(port: Int, listener: any Channel) {
        self.port = port
        self.listener = listener
    }

    /// How many connections it has accepted so far.
    public var connectionCount: Int {
        self.connections.withLock { $0.count }
    }

    /// Returns once the client or the origin has closed connection `number` (from 0, in the
    /// order they were accepted), which must have been accepted.
    public func closed(connection number: Int) async {
        let channel = self.connections.withLock { $0[number] }
        try? await channel.closeFuture.get()
    }

    /// The heads of the requests received so far (request line and fields), in order.
    public var requests: [String] {
        self.received.withLock { $0 }
    }

    /// The URL of `path` on this origin: `http://127.0.0.1:<port><path>`; `path` is not escaped.
    public func url(_ path: String) -> URL {
        URL(string: "http://127.0.0.1:\(self.port)\(path)")!
    }

    /// Stops listening and closes every connection.
    public func stop() {
        self.listener.close(promise: nil)
        for connection in self.connections.withLock({ $0 }) { connection.close(promise: nil) }
    }

    /// Starts an origin that answers the requests in the order they arrive with `replies`, and
    /// every later one with the last of them.
    ///
    /// - Precondition: `replies` is not empty (a request to an origin without replies traps).
    /// - Throws: NIO's error if no port could be bound.
    public static func start(answering replies: [Reply]) async throws -> RawOrigin {
        let next = Mutex(0)
        return try await Self.start { _ in
            let number = next.withLock { number in
                defer { number += 1 }
                return number
            }
            return replies[min(number, replies.count - 1)]
        }
    }

    /// Starts an origin on 127.0.0.1 at a free port that answers each request head (the text up
    /// to the blank line) with what `handler` returns for it.
    ///
    /// - Throws: NIO's error if no port could be bound.
    public static func start(_ handler: @escaping @Sendable (String) -> Reply) async throws -> RawOrigin {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try acceptedConnections.wrap(channel) as NIOAsyncChannel<ByteBuffer, ByteBuffer>
                }
            }
        let origin = RawOrigin(port: channel.channel.localAddress?.port ?? 0, listener: channel.channel)
        Task {
            _ = try? await channel.executeThenClose { inbound in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in inbound {
                        origin.connections.withLock { $0.append(connection.channel) }
                        group.addTask { try? await origin.serve(connection, handler) }
                    }
                }
            }
        }
        return origin
    }

    private func serve(
        _ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>,
        _ handler: @Sendable (String) -> Reply
    ) async throws {
        try await connection.executeThenClose { inbound, outbound in
            var head = Data()
            for try await buffer in inbound {
                head.append(contentsOf: buffer.readableBytesView)
                // Every request the tests send has no body: its head ends the request.
                guard let end = head.range(of: Data("\r\n\r\n".utf8)) else { continue }
                let text = String(decoding: head[..<end.lowerBound], as: UTF8.self)
                head = Data(head[end.upperBound...])
                self.received.withLock { $0.append(text) }
                let reply = handler(text)
                try await outbound.write(ByteBuffer(bytes: reply.bytes))
                if let (piece, count) = reply.repeating {
                    let buffer = ByteBuffer(bytes: piece)
                    for _ in 0..<count { try await outbound.write(buffer) }
                }
                if reply.staysOpen {
                    try await connection.channel.closeFuture.get()
                }
                if reply.keepsServing { continue }
                return
            }
        }
    }
}
