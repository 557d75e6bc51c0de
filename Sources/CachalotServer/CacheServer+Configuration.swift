import Cachalot
import Foundation

extension CacheServer {
    /// What a ``CacheServer`` listens on, forwards to, and the limits it keeps.
    public struct Configuration: Sendable {
        /// The origin every request is forwarded to: `http://host[:port][/base]`. A request for
        /// `/a?b` goes to `base/a?b` there.
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
        /// Clients whose `Forwarded` and `X-Forwarded-*` fields are passed on (load balancers
        /// in front of the proxy), by IP address. From anyone else those fields are dropped, so
        /// that no client can steer what the origin answers under a shared key. Default: none.
        public var trustedProxies: Set<String>
        /// The name the proxy gives itself in `Via` and `Cache-Status`. Default: `cachalot`.
        public var name: String
        /// The limits that bound what one client can make the proxy hold or wait for.
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

        /// Creates a configuration.
        public init(
            origin: URL,
            listen: Address = Address(host: "127.0.0.1", port: 8080),
            admin: Address? = nil,
            adminToken: String? = nil,
            trustedProxies: Set<String> = [],
            name: String = "cachalot",
            limits: Limits = Limits(),
            metrics: MetricsConfiguration? = nil,
            metricsText: (@Sendable () -> String)? = nil,
            images: ImageEndpoint? = nil
        ) {
            self.origin = origin
            self.listen = listen
            self.admin = admin
            self.adminToken = adminToken
            self.trustedProxies = trustedProxies
            self.name = name
            self.limits = limits
            self.metrics = metrics
            self.metricsText = metricsText
            self.images = images
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
        /// An IP address or a host name.
        public var host: String
        /// The port; 0 for any free one.
        public var port: Int

        /// Creates an address.
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

        public var description: String {
            self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
        }
    }

    /// The limits one client meets.
    public struct Limits: Sendable, Hashable {
        /// The most connections open at once; further ones are closed as they arrive.
        /// Default: 1,024.
        public var maximumConnections: Int
        /// The longest request line (method, target, version); longer gets 414. Default: 8 KiB.
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
        /// How long a response may wait for its client to take any of it (to read from its
        /// connection): a client that stops reading longer is disconnected. Default: 60 seconds,
        /// nginx's `send_timeout`.
        public var sendTimeout: Duration
        /// How long requests in flight may go on once shutdown began; then their connections are
        /// closed. Default: 10 seconds.
        public var shutdownGracePeriod: Duration

        /// Creates limits.
        public init(
            maximumConnections: Int = 1_024,
            maximumRequestLine: Int = 8 << 10,
            maximumHeaderBytes: Int = 32 << 10,
            maximumRequestBody: Int = 16 << 20,
            requestHeadTimeout: Duration = .seconds(30),
            sendTimeout: Duration = .seconds(60),
            shutdownGracePeriod: Duration = .seconds(10)
        ) {
            self.maximumConnections = maximumConnections
            self.maximumRequestLine = maximumRequestLine
            self.maximumHeaderBytes = maximumHeaderBytes
            self.maximumRequestBody = maximumRequestBody
            self.requestHeadTimeout = requestHeadTimeout
            self.sendTimeout = sendTimeout
            self.shutdownGracePeriod = shutdownGracePeriod
        }

        func validate() throws(ServerError) {
            guard self.maximumConnections > 0, self.maximumRequestLine >= 64, self.maximumHeaderBytes >= 256,
                self.maximumRequestBody >= 0, self.requestHeadTimeout > .zero, self.sendTimeout > .zero,
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

/// Why a ``CacheServer`` cannot start.
public struct ServerError: Error, Sendable, CustomStringConvertible {
    /// What is wrong and what to do.
    public var message: String

    init(_ message: String) {
        self.message = message
    }

    public var description: String { self.message }
}
