/// Why a transport could not deliver a response: what every ``HTTPTransport`` reports the same
/// way, so that a caller (the proxy's 502 or 504, say) need not know which transport it has.
///
/// ```swift
/// catch let error as LoadError where (error.underlying as? HTTPTransportError)?.isTimeout == true {
///     // the origin was too slow: 504
/// }
/// ```
public struct HTTPTransportError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case connectFailed, connectTimeout, responseTimeout, idleTimeout, invalidResponse, connectionClosed
        }
        private let base: Base

        /// No connection to the origin could be made: its name is unknown, or it refused.
        public static let connectFailed = Code(base: .connectFailed)
        /// No connection to the origin was made within the transport's connect timeout.
        public static let connectTimeout = Code(base: .connectTimeout)
        /// The origin did not send a whole response head within the transport's response timeout.
        public static let responseTimeout = Code(base: .responseTimeout)
        /// The origin sent nothing within the transport's idle timeout while more was owed.
        public static let idleTimeout = Code(base: .idleTimeout)
        /// The origin's bytes are not an HTTP response that can be passed on: a status below 100,
        /// a switch of protocols nobody asked for, a framing or syntax error.
        public static let invalidResponse = Code(base: .invalidResponse)
        /// The connection closed before the response was complete.
        public static let connectionClosed = Code(base: .connectionClosed)

        /// The code's name, such as `responseTimeout`.
        public var description: String { "\(self.base)" }
    }

    /// The kind of failure.
    public var code: Code
    /// What happened, as a sentence.
    public var message: String
    /// The error beneath, if any: the client library's or the socket's.
    public var underlying: (any Error)?

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - message: What happened, as a sentence.
    ///   - underlying: The error beneath. Default: `nil`.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// Whether the origin was too slow rather than wrong: a connect, response or idle timeout.
    public var isTimeout: Bool {
        self.code == .connectTimeout || self.code == .responseTimeout || self.code == .idleTimeout
    }

    /// `HTTPTransportError.<code>: <message>`.
    public var description: String {
        "HTTPTransportError.\(self.code): \(self.message)"
    }
}
