import Cachalot
import Foundation

extension CacheServer {
    /// What a ``CacheServer`` listens on, forwards to, and the limits it keeps.
    ///
    /// Only ``origin`` has no default. ``CacheServer/init(configuration:loader:group:logger:)``
    /// checks the whole configuration and throws a ``ServerError`` that names what is wrong.
    ///
    /// ```swift
    /// var configuration = CacheServer.Configuration(origin: URL(string: "http://127.0.0.1:8000")!)
    /// configuration.admin = CacheServer.Address(host: "127.0.0.1", port: 9090)
    /// configuration.limits.maximumConnections = 4_096
    /// ```
    public struct Configuration: Sendable {
        /// The origin every request is forwarded to: `http://host[:port][/base]`. A request for
        /// `/a?b` goes to `base/a?b` there. It has no default; it must be an `http` or `https`
        /// URL with a host and no query.
        public var origin: URL
        /// Where the proxy listens. Default: 127.0.0.1, port 8080. Port 0 picks a free port (see
        /// ``CacheServer/addresses``).
        public var listen: Address
        /// Where the admin listener (health, purge) listens; `nil` for none. Default: `nil`.
        /// Bind it to loopback: anyone who reaches it can empty the cache unless
        /// ``adminToken`` is set.
        public var admin: Address?
        /// The bearer token the admin listener requires in `Authorization: Bearer …`, except
        /// for `/healthz`; `nil` to require none. Default: `nil`.
        public var adminToken: String?
        /// Clients whose `Forwarded`, `X-Forwarded-*` and override fields (`X-Original-URL`,
        /// `X-HTTP-Method-Override`…) are passed on (load balancers in front of the proxy), by IP
        /// address. From anyone else those fields are dropped, so that no client can steer what
        /// the origin answers under a shared key. Addresses compare as addresses: `127.0.0.1`
        /// matches the peer `::ffff:127.0.0.1` that a dual-stack listener sees. Default: none.
        public var trustedProxies: Set<String>
        /// Whether the host the client asked for (its `Host`, or an absolute target's authority)
        /// is part of the cache key, and passed on to the origin. Default: `false`.
        ///
        /// Off, every client's request is forwarded with the origin's own authority as `Host`
        /// and no `X-Forwarded-Host` nor `Forwarded: host=`, and stored under the URL on the
        /// origin, as nginx's defaults do (`proxy_set_header Host $proxy_host`, a key of
        /// `$scheme$proxy_host$request_uri`): an origin that builds links from the host it is
        /// told cannot be made to store one client's host for all. On, as Varnish's default
        /// `vcl_hash` does, each host has its own entries, and the origin sees the client's
        /// host in `Host`, `X-Forwarded-Host` and `Forwarded: host=`: for an origin that
        /// serves several sites by name.
        public var keysHost: Bool
        /// The name the proxy gives itself in `Via` and `Cache-Status`; an HTTP token (letters,
        /// digits, `-._~`). Default: `cachalot`.
        public var name: String
        /// The limits that bound what one client can make the proxy hold or wait for. Default:
        /// `Limits()`, each limit at its own default.
        public var limits: Limits
        /// Where the proxy reports its counters (requests by what the cache did, bytes from
        /// the cache and from the origin, the origin's time to answer); `nil` for nowhere.
        /// Default: `nil`.
        public var metrics: MetricsConfiguration?
        /// Makes the text that the admin listener's `/metrics` answers with (the Prometheus
        /// exposition format, from the registry the application bootstrapped); `nil` to
        /// answer 404 there. Default: `nil`.
        public var metricsText: (@Sendable () -> String)?
        /// The image endpoint, which answers the paths under its prefix with resized images;
        /// `nil` for none (those paths go to the origin like any other). Default: `nil`.
        public var images: ImageEndpoint?
        /// The access log, a line for each request the proxy's listener answers, written off the
        /// event loops; `nil` for none. Default: `nil`.
        public var accessLog: AccessLog?

        /// Creates a configuration; each parameter sets the property of the same name.
        ///
        /// - Parameters:
        ///   - origin: The origin requests are forwarded to.
        ///   - listen: Where the proxy listens. Default: 127.0.0.1, port 8080.
        ///   - admin: Where the admin listener listens. Default: `nil`, none.
        ///   - adminToken: The admin listener's bearer token. Default: `nil`, none required.
        ///   - trustedProxies: The IP addresses whose forwarding fields are passed on. Default: none.
        ///   - keysHost: Whether the client's host is keyed and passed on. Default: `false`.
        ///   - name: The name in `Via` and `Cache-Status`. Default: `cachalot`.
        ///   - limits: The limits one client meets. Default: `Limits()`.
        ///   - metrics: Where the counters go. Default: `nil`, nowhere.
        ///   - metricsText: What the admin listener's `/metrics` answers. Default: `nil`, 404.
        ///   - images: The image endpoint. Default: `nil`, none.
        ///   - accessLog: The access log. Default: `nil`, none.
        public init(
            origin: URL,
            listen: Address = Address(host: "127.0.0.1", port: 8080),
            admin: Address? = nil,
            adminToken: String? = nil,
            trustedProxies: Set<String> = [],
            keysHost: Bool = false,
            name: String = "cachalot",
            limits: Limits = Limits(),
            metrics: MetricsConfiguration? = nil,
            metricsText: (@Sendable () -> String)? = nil,
            images: ImageEndpoint? = nil,
            accessLog: AccessLog? = nil
        ) {
            self.origin = origin
            self.listen = listen
            self.admin = admin
            self.adminToken = adminToken
            self.trustedProxies = trustedProxies
            self.keysHost = keysHost
            self.name = name
            self.limits = limits
            self.metrics = metrics
            self.metricsText = metricsText
            self.images = images
            self.accessLog = accessLog
        }

        /// Throws ``ServerError`` if the configuration cannot work.
        func validate() throws(ServerError) {
            guard let scheme = self.origin.scheme?.lowercased(), scheme == "http" || scheme == "https",
                let host = self.origin.host(), !host.isEmpty, self.origin.query == nil
            else {
                throw ServerError(
                    "The origin \(self.origin.absoluteString) is not an http or https URL with a host and no query."
                )
            }
            guard self.name.utf8.allSatisfy({ Self.isTokenByte($0) }), !self.name.isEmpty else {
                throw ServerError("The proxy's name \"\(self.name)\" must be an HTTP token (letters, digits, -._~).")
            }
            if let token = self.adminToken, token.isEmpty || !token.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) {
                throw ServerError("The admin token must be visible ASCII characters, at least one.")
            }
            try self.limits.validate()
            try self.images?.validate()
            try self.accessLog?.validate()
        }

        private static func isTokenByte(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                true
            default:
                false
            }
        }
    }

    /// A host and port to listen on.
    public struct Address: Sendable, Hashable, CustomStringConvertible {
        /// An IP address or a host name; `0.0.0.0` for every IPv4 interface. No default.
        public var host: String
        /// The port; 0 for any free one (``CacheServer/addresses`` then tells which). No default.
        public var port: Int

        /// Creates an address.
        ///
        /// Nothing is checked here: an address that cannot be bound makes ``CacheServer/run()``
        /// throw.
        ///
        /// - Parameters:
        ///   - host: An IP address or a host name.
        ///   - port: The port, 0 for any free one.
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// Reads `host:port`, `[v6]:port` or `:port` (all interfaces); `nil` if it is none of
        /// these or the port is outside 0–65535.
        public init?(_ text: String) {
            guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
                (0...65_535).contains(port)
            else { return nil }
            var host = String(text[..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            self.host = host.isEmpty ? "0.0.0.0" : host
            self.port = port
        }

        /// `host:port`, or `[v6]:port` for an IPv6 address: the form ``init(_:)`` reads.
        public var description: String {
            self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
        }
    }

    /// The limits one client meets.
    ///
    /// Each has a default; ``CacheServer/init(configuration:loader:group:logger:)`` throws a
    /// ``ServerError`` if ``maximumConnections`` or ``maximumAdminConnections`` is less than 1,
    /// ``maximumRequestLine`` less than 64, ``maximumHeaderBytes`` less than 256,
    /// ``maximumRequestBody`` negative, a timeout not positive, or ``shutdownGracePeriod``
    /// negative.
    public struct Limits: Sendable, Hashable {
        /// The most connections open at once on the proxy's listener. At the limit, a new
        /// connection is admitted in place of the one idle the longest (waiting for a request,
        /// between keep-alive requests or since it opened), which is closed; only when every
        /// connection is answering a request is the new one closed as it arrives. Default: 1,024.
        public var maximumConnections: Int
        /// The most connections open at once on the admin listener, counted apart from the
        /// proxy's, so that `/healthz` and purges answer while the proxy's listener is full; past
        /// it, as for ``maximumConnections``. Default: 64.
        public var maximumAdminConnections: Int
        /// The longest request line (method, target, version); longer gets 414, however long.
        /// Default: 8 KiB.
        public var maximumRequestLine: Int
        /// The most bytes of header fields in a request; more gets 431. Default: 32 KiB.
        public var maximumHeaderBytes: Int
        /// The largest request body (of a `POST`, say) the proxy forwards; larger gets 413.
        /// Bodies are held whole before they are sent on. Default: 16 MiB.
        public var maximumRequestBody: Int
        /// How long a client may take to send a whole request head, from the moment the
        /// connection opened or its previous response was sent: a connection idle or
        /// trickling longer is closed. Default: 30 seconds.
        public var requestHeadTimeout: Duration
        /// How long a client may take, once its request head is read, to send the next piece of
        /// the request's body (nginx's `client_body_timeout`): a client silent longer is answered
        /// 408 and disconnected, and nothing of the request is forwarded. Default: 60 seconds.
        public var requestBodyTimeout: Duration
        /// How long a client may take to send a whole request body, from the end of its head,
        /// however steadily it sends: a body that takes longer is answered 408 and the
        /// connection closed, and nothing of the request is forwarded. It bounds how long a
        /// client trickling a body (a byte within each ``requestBodyTimeout``) holds a connection
        /// that, busy, is never closed to admit another. Default: 10 minutes, time for the
        /// largest body (``maximumRequestBody``) at 28 KB/s.
        public var requestBodyTotalTimeout: Duration
        /// How long a response may wait for its client to take any of it (to read from its
        /// connection): a client that stops reading longer is disconnected. Default: 60 seconds,
        /// nginx's `send_timeout`.
        public var sendTimeout: Duration
        /// How long requests in flight may go on once shutdown began; then their connections are
        /// closed. Default: 10 seconds.
        public var shutdownGracePeriod: Duration

        /// Creates limits; each parameter sets the property of the same name.
        ///
        /// - Parameters:
        ///   - maximumConnections: The most connections open at once. Default: 1,024.
        ///   - maximumAdminConnections: The most connections open at once on the admin listener.
        ///     Default: 64.
        ///   - maximumRequestLine: The longest request line, in bytes. Default: 8 KiB.
        ///   - maximumHeaderBytes: The most bytes of header fields. Default: 32 KiB.
        ///   - maximumRequestBody: The largest request body forwarded, in bytes. Default: 16 MiB.
        ///   - requestHeadTimeout: How long a client may take to send a request head. Default: 30 seconds.
        ///   - requestBodyTimeout: How long a client may take between two pieces of a request body.
        ///     Default: 60 seconds.
        ///   - requestBodyTotalTimeout: How long a client may take to send a whole request body.
        ///     Default: 10 minutes.
        ///   - sendTimeout: How long a response may wait for its client to read. Default: 60 seconds.
        ///   - shutdownGracePeriod: How long requests in flight go on after shutdown began.
        ///     Default: 10 seconds.
        public init(
            maximumConnections: Int = 1_024,
            maximumAdminConnections: Int = 64,
            maximumRequestLine: Int = 8 << 10,
            maximumHeaderBytes: Int = 32 << 10,
            maximumRequestBody: Int = 16 << 20,
            requestHeadTimeout: Duration = .seconds(30),
            requestBodyTimeout: Duration = .seconds(60),
            requestBodyTotalTimeout: Duration = .seconds(600),
            sendTimeout: Duration = .seconds(60),
            shutdownGracePeriod: Duration = .seconds(10)
        ) {
            self.maximumConnections = maximumConnections
            self.maximumAdminConnections = maximumAdminConnections
            self.maximumRequestLine = maximumRequestLine
            self.maximumHeaderBytes = maximumHeaderBytes
            self.maximumRequestBody = maximumRequestBody
            self.requestHeadTimeout = requestHeadTimeout
            self.requestBodyTimeout = requestBodyTimeout
            self.requestBodyTotalTimeout = requestBodyTotalTimeout
            self.sendTimeout = sendTimeout
            self.shutdownGracePeriod = shutdownGracePeriod
        }

        func validate() throws(ServerError) {
            guard self.maximumConnections > 0, self.maximumAdminConnections > 0, self.maximumRequestLine >= 64,
                self.maximumHeaderBytes >= 256, self.maximumRequestBody >= 0, self.requestHeadTimeout > .zero,
                self.requestBodyTimeout > .zero, self.requestBodyTotalTimeout > .zero, self.sendTimeout > .zero,
                self.shutdownGracePeriod >= .zero
            else {
                throw ServerError(
                    "A limit is out of range: connections must be at least 1, the request line 64 bytes, "
                        + "the header section 256 bytes, and the timeouts positive."
                )
            }
        }
    }
}

/// Why a ``CacheServer`` cannot start: a configuration that cannot work, a loader without the
/// rules of a shared cache, or a listener without an address.
///
/// Errors from binding a listener (an address in use, say) are NIO's own, thrown by
/// ``CacheServer/run()`` as they come.
public struct ServerError: Error, Sendable, CustomStringConvertible {
    /// What is wrong and what to do, as a sentence; there is no default.
    public var message: String

    init(_ message: String) {
        self.message = message
    }

    /// The ``message``.
    public var description: String { self.message }
}
