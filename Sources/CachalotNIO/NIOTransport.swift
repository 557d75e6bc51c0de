import Cachalot
import Foundation
import HTTPTypes
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// An `HTTPTransport` that owns its whole exchange with an origin, on SwiftNIO's HTTP/1.1
/// codec: the transport of `cachalot serve` and of the `cachalot` tool.
///
/// ```swift
/// let transport = NIOTransport()
/// let loader = try ResourceLoader(transport: transport, disk: disk)
/// // …
/// transport.shutDown()  // closes the idle connections it keeps
/// ```
///
/// No byte an origin sends can stop the process. Every status, framing or syntax an origin can
/// send becomes either a response or an `HTTPTransportError` for that one request: a status
/// below 100 (whose framing HTTP leaves undefined), an unasked switch of protocols, a body
/// longer or shorter than its framing, a malformed field. General clients cannot promise this:
/// AsyncHTTPClient 1.37 traps on the body of a status below 100.
///
/// Like a cache's client must, it never follows a redirect (the loader does, so that each hop is
/// cached under its own URL) and never decompresses: the cache stores what the origin sent.
/// Interim responses (102, 103 and the like) go to the `interim` closure of
/// ``send(_:body:interim:)`` as they arrive, and are never part of the response.
///
/// Connections are kept alive and reused, newest first, up to
/// ``Configuration-swift.struct/maximumIdleConnectionsPerOrigin`` idle ones per origin. An
/// idempotent request that meets a kept connection the origin has just closed is sent once
/// more on a new one. `https` origins are reached over TLS with the system's trust roots,
/// unless ``Configuration-swift.struct/tls`` says otherwise.
public struct NIOTransport: HTTPTransport {
    /// How a ``NIOTransport`` connects and how long it waits.
    ///
    /// Each timeout bounds one phase, the way nginx's `proxy_connect_timeout` and
    /// `proxy_read_timeout` do; each fails the request with an `HTTPTransportError` whose
    /// `isTimeout` is true.
    public struct Configuration: Sendable {
        /// The most time to make a connection, TLS included. Default: 10 seconds.
        public var connectTimeout: Duration
        /// The most time from sending a request to having the whole head of its final response.
        /// Default: 30 seconds.
        public var responseTimeout: Duration
        /// The most time the origin may send nothing while more of a response's body is owed
        /// and wanted; time spent waiting for a slow reader of the body does not count.
        /// Default: 30 seconds.
        public var idleTimeout: Duration
        /// The most idle connections kept per origin; more are closed as they become idle.
        /// Default: 64.
        public var maximumIdleConnectionsPerOrigin: Int
        /// How `https` origins are reached. Default: SwiftNIO SSL's client configuration, which
        /// checks certificates against the system's trust roots.
        public var tls: TLSConfiguration

        /// Creates a configuration; each parameter sets the property of the same name.
        ///
        /// - Parameters:
        ///   - connectTimeout: The most time to make a connection. Default: 10 seconds.
        ///   - responseTimeout: The most time until a response head. Default: 30 seconds.
        ///   - idleTimeout: The most silence while data is owed. Default: 30 seconds.
        ///   - maximumIdleConnectionsPerOrigin: Idle connections kept per origin. Default: 64.
        ///   - tls: How `https` origins are reached. Default: the system's trust roots.
        public init(
            connectTimeout: Duration = .seconds(10),
            responseTimeout: Duration = .seconds(30),
            idleTimeout: Duration = .seconds(30),
            maximumIdleConnectionsPerOrigin: Int = 64,
            tls: TLSConfiguration = .makeClientConfiguration()
        ) {
            self.connectTimeout = connectTimeout
            self.responseTimeout = responseTimeout
            self.idleTimeout = idleTimeout
            self.maximumIdleConnectionsPerOrigin = maximumIdleConnectionsPerOrigin
            self.tls = tls
        }
    }

    /// How the transport connects and how long it waits.
    public let configuration: Configuration
    private let group: any EventLoopGroup
    /// The loops of ``group``, by identity.
    private let loops: Set<ObjectIdentifier>
    private let pool: OriginPool
    private let tlsContext: TLSContext

    /// Creates a transport.
    ///
    /// - Parameters:
    ///   - configuration: How it connects and how long it waits. Default: the defaults of
    ///     ``Configuration-swift.struct``.
    ///   - group: The event loops its connections run on. Default: SwiftNIO's shared
    ///     `MultiThreadedEventLoopGroup.singleton`.
    public init(
        configuration: Configuration = .init(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.configuration = configuration
        self.group = group
        self.loops = Set(group.makeIterator().map { ObjectIdentifier($0) })
        self.pool = OriginPool(maximumIdlePerOrigin: max(0, configuration.maximumIdleConnectionsPerOrigin))
        self.tlsContext = TLSContext(configuration: configuration.tls)
    }

    /// Closes the idle connections the transport keeps, and every connection that becomes
    /// idle later. Requests in progress go on.
    public func shutDown() {
        self.pool.shutDown()
    }

    /// Sends `request` with `body` and returns the final response's head as soon as it
    /// arrives, with its body to read as it comes.
    ///
    /// - Throws: `LoadError` with code `invalidRequest` if the request has no absolute `http`
    ///   or `https` URL with a host, or its port is outside 1–65535; `HTTPTransportError`
    ///   for everything the origin or the network does wrong: `connectFailed`,
    ///   `connectTimeout`, `responseTimeout`, `invalidResponse`, `connectionClosed`; or
    ///   `CancellationError`. Reading the body throws `HTTPTransportError` too
    ///   (`idleTimeout`, `connectionClosed`, `invalidResponse`).
    public func send(_ request: HTTPRequest, body: Data?) async throws -> HTTPTransportResponse {
        try await self.send(request, body: body, relaying: nil)
    }

    /// Sends `request` with `body`, hands each interim response (102, 103…) to `interim` as it
    /// arrives, and returns the final response's head as soon as it arrives, with its body to
    /// read as it comes. `100 Continue` is not handed on: the request's body has gone already.
    /// At most 16 interim responses are handed on; more are read past.
    ///
    /// - Throws: What ``send(_:body:)`` throws.
    public func send(
        _ request: HTTPRequest,
        body: Data?,
        interim: @escaping @Sendable (HTTPResponse) async -> Void
    ) async throws -> HTTPTransportResponse {
        try await self.send(request, body: body) { head in
            guard head.status.code != 100 else { return }
            await interim(
                HTTPResponse(
                    status: .init(code: Int(head.status.code), reasonPhrase: head.status.reasonPhrase),
                    headerFields: Self.fields(of: head.headers)
                )
            )
        }
    }

    private func send(
        _ request: HTTPRequest,
        body: Data?,
        relaying interim: (@Sendable (HTTPResponseHead) async -> Void)?
    ) async throws -> HTTPTransportResponse {
        let target = try Target(request)
        let head = Self.requestHead(request, target: target, bodyLength: body?.count)
        let buffer = body.map { ByteBuffer(data: $0) }
        // Sent from a task on one of the transport's loops (`cachalot serve` runs a connection's
        // task on its loop): on a connection of that loop, so that no thread is crossed.
        let here = MultiThreadedEventLoopGroup.currentEventLoop.flatMap { loop in
            self.loops.contains(ObjectIdentifier(loop)) ? loop : nil
        }
        if let kept = self.pool.take(target.origin, preferring: here) {
            do {
                return try await self.exchange(head, body: buffer, on: kept, target: target, interim: interim)
            } catch let error as HTTPTransportError
                where error.underlying is OriginExchangeHandler.StaleConnection && Self.isIdempotent(request.method)
            {
                // The origin closed a kept connection as the request went out on it (an idle
                // timeout of its own): the request may be sent again, once, on a new connection.
            }
        }
        let connection = try await self.connect(target, on: here)
        return try await self.exchange(head, body: buffer, on: connection, target: target, interim: interim)
    }

    private func exchange(
        _ head: HTTPRequestHead,
        body: ByteBuffer?,
        on connection: OriginConnection,
        target: Target,
        interim: (@Sendable (HTTPResponseHead) async -> Void)?
    ) async throws -> HTTPTransportResponse {
        let pool = self.pool
        let (responseHead, stream) = try await connection.exchange(
            head,
            body: body,
            timeouts: .init(
                response: Self.timeAmount(self.configuration.responseTimeout),
                idle: Self.timeAmount(self.configuration.idleTimeout)
            ),
            interim: interim,
            onReusable: { pool.put(connection, for: target.origin) }
        )
        let code = Int(responseHead.status.code)
        guard (200...999).contains(code) else {
            connection.close()
            throw HTTPTransportError(.invalidResponse, "The origin answered with the status \(code).")
        }
        let response = HTTPResponse(
            status: .init(code: code, reasonPhrase: responseHead.status.reasonPhrase),
            headerFields: Self.fields(of: responseHead.headers)
        )
        return HTTPTransportResponse(response: response, body: HTTPBody(stream) { Data(buffer: $0) })
    }

    /// `headers` as HTTPTypes fields; a field whose name is not a token is dropped.
    private static func fields(of headers: HTTPHeaders) -> HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(headers.count)
        for (name, value) in headers {
            guard let name = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: name, value: value))
        }
        return fields
    }

    // MARK: - Connecting

    /// A new connection to `target`'s origin, on `loop` if given, else on one of ``group``'s.
    private func connect(_ target: Target, on loop: (any EventLoop)?) async throws -> OriginConnection {
        let tls = target.origin.isSecure ? try self.tlsContext.context() : nil
        let serverName = target.serverName
        let bootstrap = ClientBootstrap(group: loop ?? self.group)
            .connectTimeout(Self.timeAmount(self.configuration.connectTimeout))
            .channelOption(ChannelOptions.autoRead, value: false)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let operations = channel.pipeline.syncOperations
                    if let tls {
                        try operations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverName))
                    }
                    try operations.addHandlers([
                        OriginRequestEncoder(),
                        ByteToMessageHandler(HTTPResponseDecoder(informationalResponseStrategy: .forward)),
                    ])
                    try operations.addHandler(OriginExchangeHandler())
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: target.origin.host, port: target.origin.port).get()
        } catch ChannelError.connectTimeout {
            throw HTTPTransportError(
                .connectTimeout,
                "No connection to \(target.origin.host):\(target.origin.port) was made in time."
            )
        } catch let error as NIOConnectionError {
            let cause =
                error.connectionErrors.isEmpty
                ? "its name is unknown (DNS: \(error.dnsAError.map { "\($0)" } ?? "no answer"))"
                : error.connectionErrors.map { "\($0.error)" }.joined(separator: ", ")
            throw HTTPTransportError(
                .connectFailed,
                "No connection to \(target.origin.host):\(target.origin.port) could be made: \(cause).",
                underlying: error
            )
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw HTTPTransportError(
                .connectFailed,
                "No connection to \(target.origin.host):\(target.origin.port) could be made: \(error).",
                underlying: error
            )
        }
        do {
            return try await channel.eventLoop.submit {
                let handler = try channel.pipeline.syncOperations.handler(type: OriginExchangeHandler.self)
                return OriginConnection(channel: channel, handler: handler)
            }.get()
        } catch {
            // Closed, its handlers gone, as soon as it was made: a TLS handshake that failed at
            // once (an untrusted certificate), or an origin that hung up.
            channel.close(promise: nil)
            throw HTTPTransportError(
                .connectionClosed,
                "The connection to \(target.origin.host):\(target.origin.port) closed as soon as it was made.",
                underlying: error
            )
        }
    }

    /// The TLS context for `https` origins, made on first use: a transport that only reaches
    /// `http` origins never loads the trust roots.
    private final class TLSContext: Sendable {
        private let configuration: TLSConfiguration
        private let made = Mutex<NIOSSLContext?>(nil)

        init(configuration: TLSConfiguration) {
            self.configuration = configuration
        }

        func context() throws -> NIOSSLContext {
            try self.made.withLock { made in
                if let made { return made }
                let context = try NIOSSLContext(configuration: self.configuration)
                made = context
                return context
            }
        }
    }

    // MARK: - The request

    /// Where a request goes: the origin, the target in origin form, and the `Host` field.
    struct Target {
        var origin: OriginPool.Origin
        var path: String
        var authority: String

        /// The name for TLS's server name indication: the host, unless it is an IP address.
        var serverName: String? {
            let host = self.origin.host
            let isAddress =
                host.contains(":")
                || (host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." })
            return isAddress ? nil : host
        }

        init(_ request: HTTPRequest) throws {
            guard let scheme = request.scheme?.lowercased(), scheme == "http" || scheme == "https",
                let authority = request.authority, !authority.isEmpty,
                let url = URL(string: "\(scheme)://\(authority)/"), let host = url.host(percentEncoded: false),
                !host.isEmpty
            else {
                throw LoadError(.invalidRequest, "The request has no absolute http or https URL to send to.")
            }
            let port = url.port ?? (scheme == "https" ? 443 : 80)
            guard (1...65_535).contains(port) else {
                throw LoadError(.invalidRequest, "The port \(port) of \(authority) is not from 1 to 65535.")
            }
            let unbracketed = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            self.origin = .init(isSecure: scheme == "https", host: unbracketed, port: port)
            self.path = request.path.flatMap { $0.isEmpty ? nil : $0 } ?? "/"
            self.authority = authority
        }
    }

    /// The HTTP/1.1 head of `request`: `Host` from its authority unless it has one, and the
    /// length of its body, if it has one or its method expects one.
    static func requestHead(_ request: HTTPRequest, target: Target, bodyLength: Int?) -> HTTPRequestHead {
        // Made as pairs: `HTTPHeaders.add` checks each name again, which are tokens already.
        var pairs: [(String, String)] = []
        pairs.reserveCapacity(request.headerFields.count + 2)
        if !request.headerFields.contains(where: { $0.name.canonicalName == "host" }) {
            pairs.append(("Host", target.authority))
        }
        for field in request.headerFields
        where field.name != .contentLength && field.name != .transferEncoding {
            pairs.append((field.name.rawName, field.value))
        }
        if let bodyLength {
            pairs.append(("Content-Length", String(bodyLength)))
        } else if [.post, .put, .patch].contains(request.method) {
            pairs.append(("Content-Length", "0"))
        }
        return HTTPRequestHead(
            version: .http1_1,
            method: HTTPMethod(rawValue: request.method.rawValue),
            uri: target.path,
            headers: HTTPHeaders(pairs)
        )
    }

    /// Whether a request with `method` may be sent twice with the effect of once (RFC 9110
    /// §9.2.2).
    static func isIdempotent(_ method: HTTPRequest.Method) -> Bool {
        [.get, .head, .options, .trace, .put, .delete].contains(method)
    }

    /// `duration` as SwiftNIO's time, from a millisecond to a year: a deadline that far off never
    /// overflows SwiftNIO's clock.
    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let year = Duration.seconds(365 * 24 * 3_600)
        let clamped = min(max(duration, .milliseconds(1)), year)
        let (seconds, attoseconds) = clamped.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
