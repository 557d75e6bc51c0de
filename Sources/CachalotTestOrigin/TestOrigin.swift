import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A real HTTP/1.1 origin on 127.0.0.1 with a port of its own, whose answers each test
/// scripts and whose received requests each test checks: for tests and benchmarks of code that
/// loads over HTTP, without the internet.
///
/// ```swift
/// let origin = try await TestOrigin.start { request in
///     .init(fields: [("Cache-Control", "max-age=60")], body: "hello")
/// }
/// defer { origin.stop() }
/// let resource = try await loader.load(origin.url("/hello"))
/// #expect(origin.requests.count == 1)
/// ```
public final class TestOrigin: Sendable {
    /// One scripted answer.
    public struct Reply: Sendable {
        /// The status code. Default: 200.
        public var status: Int
        /// The header fields, in order; `Content-Length` is added unless they have one (or the
        /// reply ``isChunked``). Default: none.
        public var fields: [(String, String)]
        /// The body, sent in pieces of 16 KiB. Default: empty.
        public var body: Data
        /// Sends only this many body bytes, then closes the connection, while `Content-Length`
        /// announces the whole body. Default: `nil`, the whole body.
        public var truncatedAfter: Int?
        /// Sends the body in chunks without announcing its length. Default: `false`.
        public var isChunked = false
        /// Sends only this many body bytes, calls `reached`, then sends nothing more until the
        /// client closes the connection: a download that hangs. Default: `nil`.
        public var stall: (after: Int, reached: @Sendable () -> Void)?
        /// Sends this many body bytes, then waits for `resume` to return before sending the rest:
        /// a body that arrives in two parts, when the test says. Default: `nil`.
        public var pause: (after: Int, resume: @Sendable () async -> Void)?

        /// Creates an answer with a text body.
        ///
        /// - Parameters:
        ///   - status: The status code. Default: 200.
        ///   - fields: The header fields, in order. Default: none.
        ///   - body: The body, as UTF-8. Default: empty.
        ///   - truncatedAfter: How many body bytes to send before closing. Default: `nil`, all.
        public init(status: Int = 200, fields: [(String, String)] = [], body: String = "", truncatedAfter: Int? = nil) {
            self.init(status: status, fields: fields, data: Data(body.utf8), truncatedAfter: truncatedAfter)
        }

        /// Creates an answer with a body of bytes.
        ///
        /// - Parameters:
        ///   - status: The status code. Default: 200.
        ///   - fields: The header fields, in order. Default: none.
        ///   - data: The body.
        ///   - truncatedAfter: How many body bytes to send before closing. Default: `nil`, all.
        public init(status: Int = 200, fields: [(String, String)] = [], data: Data, truncatedAfter: Int? = nil) {
            self.status = status
            self.fields = fields
            self.body = data
            self.truncatedAfter = truncatedAfter
        }
    }

    /// Answers a request.
    public typealias Handler = @Sendable (HTTPRequest) async -> Reply

    /// The port it listens on.
    public let port: Int
    private let handler: Mutex<Handler>
    private let received = Mutex<[HTTPRequest]>([])
    private let listener: any Channel
    private let connections = Mutex<[any Channel]>([])

    private init(port: Int, handler: @escaping Handler, listener: any Channel) {
        self.port = port
        self.handler = Mutex(handler)
        self.listener = listener
    }

    /// The requests received so far, in order.
    public var requests: [HTTPRequest] {
        self.received.withLock { $0 }
    }

    /// The URL of `path` on this origin: `http://127.0.0.1:<port><path>`.
    ///
    /// - Parameter path: A path and query starting with `/`; it is not escaped.
    public func url(_ path: String) -> URL {
        URL(string: "http://127.0.0.1:\(self.port)\(path)")!
    }

    /// Answers the next requests with `handler`.
    public func respond(with handler: @escaping Handler) {
        self.handler.withLock { $0 = handler }
    }

    /// Stops listening and closes every connection: later requests find nobody there.
    public func stop() {
        self.listener.close(promise: nil)
        for connection in self.connections.withLock({ $0 }) { connection.close(promise: nil) }
    }

    /// Starts an origin on 127.0.0.1 at a free port that answers with `handler`.
    ///
    /// - Parameter handler: Makes the answer to each request. Default: an empty 200.
    /// - Throws: NIO's error if no port could be bound.
    public static func start(_ handler: @escaping Handler = { _ in Reply() }) async throws -> TestOrigin {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    return try acceptedConnections.wrap(channel)
                        as NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>
                }
            }
        let port = channel.channel.localAddress?.port ?? 0
        let origin = TestOrigin(port: port, handler: handler, listener: channel.channel)
        // Every accepted connection is served (and so closed), even after stop(): NIO requires
        // each to be closed by its owner.
        Task {
            _ = try? await channel.executeThenClose { inbound in
                try await withThrowingDiscardingTaskGroup { group in
                    for try await connection in inbound {
                        origin.connections.withLock { $0.append(connection.channel) }
                        group.addTask { try? await origin.serve(connection) }
                    }
                }
            }
        }
        return origin
    }

    private func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async throws {
        try await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            for try await part in inbound {
                switch part {
                case .head(let received):
                    head = received
                case .body:
                    continue
                case .end:
                    guard let head else { continue }
                    let request = Self.request(from: head, port: self.port)
                    self.received.withLock { $0.append(request) }
                    let reply = await self.handler.withLock({ $0 })(request)
                    var headers = HTTPHeaders(reply.fields)
                    // A Content-Length the reply gives stands, even a wrong one.
                    if !reply.isChunked && !headers.contains(name: "Content-Length") {
                        headers.add(name: "Content-Length", value: String(reply.body.count))
                    }
                    let status = HTTPResponseStatus(statusCode: reply.status)
                    try await outbound.write(
                        .head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))
                    )
                    let sent = (reply.truncatedAfter ?? reply.stall?.after).map { reply.body.prefix($0) } ?? reply.body
                    // In pieces of 16 KiB, as a real origin's body arrives.
                    var offset = sent.startIndex
                    while offset < sent.endIndex {
                        if let pause = reply.pause, offset == sent.startIndex + pause.after { await pause.resume() }
                        var end = min(offset + 16_384, sent.endIndex)
                        if let pause = reply.pause, offset < sent.startIndex + pause.after {
                            end = min(end, sent.startIndex + pause.after)
                        }
                        try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: sent[offset..<end]))))
                        offset = end
                    }
                    if let stall = reply.stall {
                        stall.reached()
                        try await connection.channel.closeFuture.get()
                        return
                    }
                    // A truncated body ends with the connection, not with the message.
                    if reply.truncatedAfter != nil { return }
                    try await outbound.write(.end(nil))
                }
            }
        }
    }

    private static func request(from head: HTTPRequestHead, port: Int) -> HTTPRequest {
        var fields = HTTPFields()
        for (name, value) in head.headers {
            if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
        }
        return HTTPRequest(
            // NIO spells M-SEARCH without its hyphen.
            method: HTTPRequest.Method(head.method == .MSEARCH ? "M-SEARCH" : head.method.rawValue) ?? .get,
            scheme: "http",
            authority: "127.0.0.1:\(port)",
            path: head.uri,
            headerFields: fields
        )
    }
}
