import Cachalot
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1

/// A request as a connection read it: its head, its whole body, and who sent it.
///
/// A fragment in the target (`/a#x`), which a client should not send (RFC 9112 §3.2), is
/// removed here: it is never part of the key nor sent on.
struct ServerRequest: Sendable {
    let head: HTTPRequestHead
    /// Whether its connection may stay open after its response, as its head says: asked of
    /// every request more than once, and NIO's answer reads the head's fields each time.
    let isKeepAlive: Bool
    var body: ByteBuffer?
    /// Who sent it.
    var client: Client
    /// The proxy's load of it, prepared on the event loop that read it (see
    /// ``ImmediateResponder``, which ``ServerCodec`` asks): the connection's task resumes it
    /// instead of preparing it again.
    var prepared: PreparedLoad? {
        get { self.preparedLoad?.load }
        set { self.preparedLoad = newValue.map(Prepared.init) }
    }
    /// ``prepared``, boxed: a request is copied on its way, and a load is large (a request
    /// answered at once never carries one).
    private var preparedLoad: Prepared?

    private final class Prepared: Sendable {
        let load: PreparedLoad

        init(_ load: PreparedLoad) {
            self.load = load
        }
    }

    init(head: HTTPRequestHead, body: ByteBuffer? = nil, client: Client) {
        var head = head
        // Searched in the string's bytes, where the search is specialized for them here.
        var uri = head.uri
        if let fragment = uri.withUTF8({ $0.firstIndex(of: UInt8(ascii: "#")) }) {
            head.uri = String(decoding: uri.utf8.prefix(fragment), as: UTF8.self)
        }
        self.head = head
        self.isKeepAlive = head.isKeepAlive
        self.body = body
        self.client = client
    }

    /// The head's fields as swift-http-types has them, made when asked for: a hit needs none of
    /// them but those the origin would get (``ProxyResponder/upstreamRequest(for:)``).
    var fields: HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(self.head.headers.count)
        for (name, value) in self.head.headers {
            // The parser (RequestParser) admits only tokens as names: none is dropped here.
            guard let name = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: name, value: value))
        }
        return fields
    }
}

/// Who a connection's requests come from, worked out once for the connection: formatting an
/// address costs more than answering a small hit.
///
/// A class: each request holds it, and a copy of a structure would retain and release each of
/// its fields, for every request and every handler the request passes.
final class Client: Sendable {
    /// The peer's address.
    let address: SocketAddress?
    /// Its IP address as text, as `inet_ntop` writes it.
    let ip: String?
    /// ``ip`` in its one spelling per address (``ForwardedFields/canonicalAddress(_:)``), as
    /// trusted proxies are compared.
    let canonicalIP: String?
    /// Its `Forwarded` field when no host is passed on (see
    /// ``ForwardedFields/forwardedElement(for:host:proto:)``), and its `X-Forwarded-For`: the
    /// same for each of its requests, made once.
    let forwarded: HTTPField
    let forwardedFor: HTTPField?

    init(_ address: SocketAddress?) {
        self.address = address
        self.ip = address?.ipAddress
        self.canonicalIP = self.ip.map(ForwardedFields.canonicalAddress)
        self.forwarded = HTTPField(
            name: .forwarded,
            value: ForwardedFields.forwardedElement(for: self.ip, host: nil, proto: "http")
        )
        self.forwardedFor = self.ip.map { HTTPField(name: .xForwardedFor, value: $0) }
    }
}

/// What a connection's task reads: a request without a body that its event loop read whole (and,
/// for the proxy, prepared) but could not answer at once, or the parts of a request with a body,
/// which the task reads as they come, with its limits.
enum ServerRequestPart: Sendable {
    case request(ServerRequest)
    case head(HTTPRequestHead)
    case body(ByteBuffer)
    case end
}

/// Writes one response on a connection.
///
/// Each write passes the connection's handlers and is flushed, which costs more than making a
/// small response: the head waits to go with the first piece of the body (or the end), and a
/// body in hand goes whole with its head and end in one write.
struct ResponseWriter: Sendable {
    fileprivate let outbound: AcceptedConnection
    fileprivate let version: HTTPVersion
    /// Whether the connection closes after this response: its request asked for that
    /// (`Connection: close`, or HTTP/1.0 without `keep-alive`), or its responder decided so. The
    /// head then says so with `Connection: close` (RFC 9112 §9.6).
    var closesConnection: Bool
    /// The head, until it goes with what follows it.
    private var pendingHead: HTTPResponseHead?

    fileprivate init(
        outbound: AcceptedConnection,
        version: HTTPVersion,
        closesConnection: Bool
    ) {
        self.outbound = outbound
        self.version = version
        self.closesConnection = closesConnection
    }

    /// Writes `response`, an interim response (1xx) from the origin, ahead of the final one, as
    /// RFC 9110 §15.2 asks of a proxy: its hop-by-hop fields removed, and not to an HTTP/1.0
    /// client, which cannot read one. A failed write is left for the final response to meet.
    var interim: @Sendable (HTTPResponse) async -> Void {
        let (outbound, version) = (self.outbound, self.version)
        return { response in
            let isHTTP11 = version.major > 1 || (version.major == 1 && version.minor >= 1)
            guard isHTTP11, (102..<200).contains(response.status.code) else { return }
            var response = response
            response.headerFields = ForwardedFields.removingHopByHop(response.headerFields)
            try? await outbound.write(.head(HTTPResponseHead(response, version: version)))
        }
    }

    /// Sets the head of `response`, to be written with the first piece of the body or the end.
    mutating func head(_ response: HTTPResponse) {
        var response = response
        if self.closesConnection { response.headerFields[.connection] = "close" }
        self.pendingHead = HTTPResponseHead(response, version: self.version)
    }

    /// Sets `head` to be written with the first piece of the body or the end.
    mutating func head(_ head: ClientHead) {
        self.pendingHead = head.nioHead(version: self.version, closing: self.closesConnection)
    }

    /// Writes the pending head now, without waiting for the body's first piece: for a body that
    /// comes from the origin, whose first piece may be long in coming (or never come).
    /// ``ServerCodec`` sends it with that piece if the piece comes in the jobs the event loop
    /// has queued, and alone once they have run.
    mutating func flushHead() async throws {
        guard let head = self.pendingHead else { return }
        self.pendingHead = nil
        try await self.outbound.write(.head(head))
    }

    /// Writes a piece of the body (with the head, if it has not gone yet).
    mutating func body(_ data: Data) async throws {
        try await self.write(data, ending: false)
    }

    /// Ends the response (with the head, if it has not gone yet).
    mutating func end() async throws {
        try await self.write(Data(), ending: true)
    }

    /// Writes the rest of the response at once: the head if it has not gone, `data`, the end.
    mutating func whole(_ data: Data) async throws {
        try await self.write(data, ending: true)
    }

    /// A whole response with a small body and its `Content-Length`.
    mutating func respond(_ response: HTTPResponse, body: String = "") async throws {
        var response = response
        let bytes = Data(body.utf8)
        response.headerFields[.contentLength] = String(bytes.count)
        self.head(response)
        try await self.whole(bytes)
    }

    /// Writes the pending head, `data` in slices (so that a large, mapped body is not copied
    /// whole at once), and the end if `ending`, in as few crossings as it can.
    ///
    /// A body of at most ``ProxyResponder/largestImmediateBody`` is written from its own bytes
    /// (``ByteBuffer/init(borrowing:)``), as a memory hit's is: it is never a mapped file's
    /// (the disk tier maps from 8 MiB), whose pages the event loop's write could wait for. A
    /// larger one is copied, slice by slice, where waiting is allowed (`withBlockingAllowed`):
    /// the connection's task runs on the event loop.
    private mutating func write(_ data: Data, ending: Bool) async throws {
        if ending, data.count <= Self.slice, let head = self.pendingHead {
            // All of it in hand: one part.
            self.pendingHead = nil
            try await self.outbound.write(.whole(.head(head), body: data.isEmpty ? [] : [data]))
            return
        }
        var parts: [ResponsePart] = []
        if let head = self.pendingHead {
            parts.append(.head(head))
            self.pendingHead = nil
        }
        var offset = data.startIndex
        while offset < data.endIndex {
            let end = data.index(offset, offsetBy: Self.slice, limitedBy: data.endIndex) ?? data.endIndex
            if data.count <= ProxyResponder.largestImmediateBody {
                parts.append(.body(ByteBuffer(borrowing: data[offset..<end])))
            } else {
                // Perhaps a mapped file's pages: copied where waiting for the disk is allowed.
                let slice = data[offset..<end]
                for buffer in await withBlockingAllowed({ ByteBuffer.copies(of: slice) }) {
                    parts.append(.body(buffer))
                }
            }
            offset = end
            if offset < data.endIndex {
                try await self.outbound.write(contentsOf: parts)
                parts = []
            }
        }
        if ending { parts.append(.end) }
        if !parts.isEmpty { try await self.outbound.write(contentsOf: parts) }
    }

    private static let slice = 256 << 10
}

extension ByteBuffer {
    /// The largest buffer a body is copied into for writing: below the 128 KiB from which
    /// `cachalot serve` has glibc map each allocation (``MallocTuning``), so that a body's
    /// buffers come from the allocator's free memory and go back to it, rather than being
    /// mapped, faulted in page by page and unmapped for every response.
    static let largestBodyCopy = 64 << 10

    /// `bytes` copied into buffers of at most ``largestBodyCopy`` bytes, in order.
    static func copies(of bytes: Data.SubSequence) -> [ByteBuffer] {
        var buffers: [ByteBuffer] = []
        buffers.reserveCapacity((bytes.count + Self.largestBodyCopy - 1) / Self.largestBodyCopy)
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let end = bytes.index(offset, offsetBy: Self.largestBodyCopy, limitedBy: bytes.endIndex) ?? bytes.endIndex
            buffers.append(ByteBuffer(bytes: bytes[offset..<end]))
            offset = end
        }
        return buffers
    }
}

extension HTTPResponseHead {
    /// `response`'s head as NIO writes it.
    init(_ response: HTTPResponse, version: HTTPVersion) {
        var headers = HTTPHeaders()
        headers.reserveCapacity(response.headerFields.count)
        for field in response.headerFields { headers.add(name: field.name.rawName, value: field.value) }
        let status = HTTPResponseStatus(statusCode: response.status.code, reasonPhrase: response.status.reasonPhrase)
        self.init(version: version, status: status, headers: headers)
    }
}

/// What answers the requests of a listener.
protocol Responder: Sendable {
    /// Answers `request` with `writer`; returns whether the connection may stay open.
    func respond(to request: ServerRequest, with writer: inout ResponseWriter) async throws -> Bool

    /// Whether a connection's task runs on the connection's event loop (``EventLoopExecutor``):
    /// only for a responder that never waits there, on a file or a lock, but through
    /// `withBlockingAllowed`. Otherwise the task runs on the global concurrent executor.
    var runsOnEventLoop: Bool { get }
}

extension CacheServer {
    /// Serves one connection's requests in turn until it closes, or the server shuts down.
    func serve(
        _ connection: AcceptedConnection,
        in connections: ConnectionRegistry,
        with responder: some Responder
    ) async {
        let client = Client(connection.channel.remoteAddress)
        let id = ObjectIdentifier(connection.channel)
        defer { connections.remove(id) }
        do {
            // A connection closed from outside (by the shutdown deadline) cancels its request, which
            // may be waiting on the origin.
            try await withThrowingTaskGroup { group in
                group.addTask {
                    do {
                        try await self.serveRequests(
                            connection,
                            id: id,
                            in: connections,
                            client: client,
                            with: responder
                        )
                    } catch {
                        await Self.close(connection.channel)
                        throw error
                    }
                    await Self.close(connection.channel)
                }
                group.addTask { try await connection.channel.closeFuture.get() }
                try await group.next()
                group.cancelAll()
            }
        } catch {
            self.logger.debug("A connection ended with an error", metadata: ["error": "\(error)"])
        }
    }

    /// Closes `channel` once what was written to it has been sent: a close drops what the channel
    /// still holds, which may be the end of the last response, or the 400 that
    /// ``RequestPhases`` wrote for a request that followed it and could not be parsed.
    ///
    /// The wait is as long as the client takes to read: ``SendTimer`` ends it for a client that
    /// stops, ``RequestPhases`` for one that has the channel writable and reads no more, and
    /// the shutdown deadline for any.
    private static func close(_ channel: any Channel) async {
        // Shuts the output down when the writes are done; fails at once if the channel is closed.
        try? await channel.close(mode: .output).get()
        try? await channel.close().get()
    }

    private func serveRequests(
        _ connection: AcceptedConnection,
        id: ObjectIdentifier,
        in connections: ConnectionRegistry,
        client: Client,
        with responder: some Responder
    ) async throws {
        while let part = try await connection.next() {
            var request: ServerRequest
            switch part {
            case .request(let whole):
                guard connections.setBusy(id, true) else { return }
                request = whole
            case .head(let head):
                guard connections.setBusy(id, true) else { return }
                request = ServerRequest(head: head, body: nil, client: client)
                switch try await self.readBody(of: &request, from: connection) {
                case .complete:
                    break
                case .tooLarge:
                    // A body over the limit: 413, and the connection closes, its body unread.
                    var writer = ResponseWriter(outbound: connection, version: head.version, closesConnection: true)
                    try await writer.respond(
                        HTTPResponse(status: .contentTooLarge, headerFields: [.connection: "close"]),
                        body: "The request body is larger than this proxy forwards.\n"
                    )
                    return
                case .incomplete:
                    // The input ended before the body's end (the client left, or `RequestPhases`
                    // answered 408): nothing of it goes to the origin.
                    return
                }
            case .body, .end:
                continue
            }
            var writer = ResponseWriter(
                outbound: connection,
                version: request.head.version,
                closesConnection: !request.isKeepAlive
            )
            let keepAlive = try await responder.respond(to: request, with: &writer)
            guard keepAlive, request.isKeepAlive, connections.setBusy(id, false) else { return }
        }
    }

    /// How reading a request's body ended.
    private enum BodyReading {
        /// At the request's end.
        case complete
        /// Past ``Limits/maximumRequestBody``, with the rest unread.
        case tooLarge
        /// Before the request's end: the input ended.
        case incomplete
    }

    /// Reads the request's body up to its end, whole.
    private func readBody(
        of request: inout ServerRequest,
        from connection: AcceptedConnection
    ) async throws -> BodyReading {
        let limit = self.configuration.limits.maximumRequestBody
        while let part = try await connection.next() {
            switch part {
            case .head, .request:
                return .incomplete
            case .body(var piece):
                if request.body == nil {
                    request.body = piece
                } else {
                    request.body?.writeBuffer(&piece)
                }
                if (request.body?.readableBytes ?? 0) > limit { return .tooLarge }
            case .end:
                return .complete
            }
        }
        return .incomplete
    }
}
