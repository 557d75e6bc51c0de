#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The proxy's access log: one line for each request it answers, written in batches by a
/// thread of its own, so that no event loop waits on the output.
///
/// Each line says when the response was sent (UTC, to the millisecond), the client's address
/// (the TCP peer), the method, the target as sent, the status, the body bytes sent, the
/// milliseconds taken, and the proxy's `Cache-Status` member. In ``Format/text``:
///
/// ```
/// 2026-11-26T11:07:05.412Z 127.0.0.1 GET /a 200 bytes=29 ms=0.244 cache=cachalot; hit; ttl=59
/// ```
///
/// In ``Format/json``, one JSON object a line:
///
/// ```
/// {"time":"2026-11-26T11:07:05.412Z","client":"127.0.0.1","method":"GET","target":"/a","status":200,"bytes":29,"ms":0.244,"cache":"cachalot; hit; ttl=59"}
/// ```
///
/// Lines wait in a buffer of at most ``bufferSize`` bytes, written out at least every
/// ``flushInterval``, sooner when the buffer is half full, and at shutdown. A line that finds
/// the buffer full (the output does not keep up) is dropped, not waited for; the drops are
/// counted in the server's metrics (`<label>_access_log_dropped`) and logged at warning.
public struct AccessLog: Sendable {
    /// How each line is written.
    public struct Format: Sendable, Hashable, CustomStringConvertible {
        enum Code: String, Sendable {
            case text, json
        }

        let code: Code

        /// Fields separated by spaces, `Cache-Status` last: easy to read and to `grep`.
        public static let text = Format(code: .text)
        /// One JSON object a line, its strings escaped: for a log pipeline.
        public static let json = Format(code: .json)

        private init(code: Code) {
            self.code = code
        }

        /// The format named `text` or `json`; `nil` for another name.
        public init?(_ name: String) {
            guard let code = Code(rawValue: name) else { return nil }
            self.code = code
        }

        /// The format's name: `text` or `json`.
        public var description: String { self.code.rawValue }
    }

    /// How each line is written. Default: ``Format/text``.
    public var format: Format
    /// The most bytes of lines waiting to be written; a line that does not fit is dropped.
    /// Default: 1 MiB.
    public var bufferSize: Int
    /// The longest a line waits in the buffer before it is written. Default: 100 milliseconds.
    public var flushInterval: Duration
    /// Writes a batch of whole lines, each ending in a newline, on the access log's own thread,
    /// one batch at a time; it may block. Default: ``standardError``.
    public var output: @Sendable (_ lines: [UInt8]) -> Void

    /// Creates an access log; each parameter sets the property of the same name.
    ///
    /// - Parameters:
    ///   - format: How each line is written. Default: ``Format/text``.
    ///   - bufferSize: The most bytes of lines waiting to be written. Default: 1 MiB.
    ///   - flushInterval: The longest a line waits before it is written. Default: 100 milliseconds.
    ///   - output: Writes a batch of lines. Default: ``standardError``.
    public init(
        format: Format = .text,
        bufferSize: Int = 1 << 20,
        flushInterval: Duration = .milliseconds(100),
        output: @escaping @Sendable (_ lines: [UInt8]) -> Void = AccessLog.standardError
    ) {
        self.format = format
        self.bufferSize = bufferSize
        self.flushInterval = flushInterval
        self.output = output
    }

    /// Writes lines to the process's standard error (file descriptor 2), whole, retrying
    /// interrupted and partial writes; lines that cannot be written are dropped.
    public static let standardError: @Sendable (_ lines: [UInt8]) -> Void = { lines in
        lines.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            var offset = 0
            while offset < bytes.count {
                let written = write(2, base + offset, bytes.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }

    func validate() throws(ServerError) {
        guard self.bufferSize > 0, self.flushInterval > .zero else {
            throw ServerError("The access log's buffer size and flush interval must be positive.")
        }
    }
}
