/// An error thrown by Cachalot's caches.
///
/// `CacheError` is a struct rather than an enum so that new kinds of failure can be added
/// without breaking source compatibility. Compare against the static members to find out what
/// went wrong, and read ``message`` for a sentence that tells a person what to do:
///
/// ```swift
/// do {
///     _ = try MemoryCache<String, Data>(configuration: .init(costLimit: 0))
/// } catch let error as CacheError where error.code == .invalidConfiguration {
///     print(error.message)
/// }
/// ```
public struct CacheError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure, comparable with `==`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case invalidConfiguration
            case invalidArgument
            case fileSystem
            case outOfSpace
            case corrupted
            case unavailable
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// A configuration value is out of its allowed range.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// An argument passed to a cache operation is out of its allowed range.
        public static let invalidArgument = Code(.invalidArgument)
        /// A file-system call failed; ``CacheError/path`` and ``CacheError/errno`` say where and why.
        public static let fileSystem = Code(.fileSystem)
        /// The file system is full (or the user's quota is used up); nothing was written.
        public static let outOfSpace = Code(.outOfSpace)
        /// Stored bytes do not match their checksum: they were damaged on disk. The entry was
        /// removed; load it again.
        public static let corrupted = Code(.corrupted)
        /// A store across a network (see ``AsyncDataCaching``) could not be reached, failed, or
        /// did not answer in time.
        public static let unavailable = Code(.unavailable)

        /// The code in words, such as `out of space`.
        public var description: String {
            switch self.base {
            case .invalidConfiguration: "invalid configuration"
            case .invalidArgument: "invalid argument"
            case .fileSystem: "file system error"
            case .outOfSpace: "out of space"
            case .corrupted: "corrupted entry"
            case .unavailable: "store unavailable"
            }
        }
    }

    /// The kind of failure.
    public let code: Code
    /// A sentence that says what was wrong and what to do about it.
    public let message: String
    /// The file or directory involved, for file-system errors (and a damaged entry's file);
    /// `nil` when no file is involved.
    public let path: String?
    /// The operating system's error number, for file-system errors; `nil` when the failure did
    /// not come from a system call.
    public let errno: Int32?

    @usableFromInline
    package init(_ code: Code, _ message: String, path: String? = nil, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.errno = errno
    }

    /// The code in words, then the message: `out of space: …`.
    public var description: String {
        "\(self.code): \(self.message)"
    }

    static func invalidConfiguration(_ message: String) -> CacheError {
        CacheError(.invalidConfiguration, message)
    }

    @usableFromInline
    static func invalidArgument(_ message: String) -> CacheError {
        CacheError(.invalidArgument, message)
    }
}
