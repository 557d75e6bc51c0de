extension ResourceLoader {
    /// How a ``ResourceLoader`` caches and loads.
    public struct Configuration: Sendable {
        /// The caching rules: a private cache or a shared one. Default: ``CacheRules/privateCache``.
        public var rules: CacheRules
        /// The cache policy of loads that do not name their own. Default:
        /// ``CachePolicy/useProtocolCachePolicy``.
        public var policy: CachePolicy
        /// The most network requests in flight to one host; more wait, by priority. Answers
        /// from memory or disk never wait. Default: 6.
        public var maximumConnectionsPerHost: Int
        /// The most memory the memory tier of responses holds, in bytes (bodies and heads), or 0
        /// for no memory tier. Default: `nil`, the ``MemoryCache`` default (a share of the
        /// machine's memory).
        public var memoryCostLimit: Int?
        /// The largest body stored, in bytes; larger ones are answered but not stored. Default:
        /// `nil`, which means 5 % of the ``DiskCache``'s size limit (the rule Apple's `URLCache`
        /// uses), or 5 % of the memory tier's limit without a `DiskCache`, or no limit with
        /// neither.
        public var maximumEntrySize: Int?
        /// Bodies larger than this many bytes (by `Content-Length`, or as they arrive) are
        /// written to the ``DiskCache`` as they arrive and answered mapped from the file, so
        /// that they are never held whole in memory. Without a `DiskCache` as the disk tier,
        /// bodies are held in memory. Default: 8 MiB.
        public var streamingThreshold: Int
        /// The bytes of bodies from the network that the loader holds in memory at once,
        /// summed over every load, beyond which it keeps no more of them there than it must:
        /// a body being stored goes to its file of the ``DiskCache`` from its next piece, whatever
        /// its size, and a body shared by streamed loads keeps in memory none of what its file
        /// holds (a reader that falls behind reads it from there). Bodies that are not stored, and
        /// loads without a `DiskCache`, are not held back: the limit bounds what a cache can move
        /// to disk. `nil`: no limit, only ``streamingThreshold`` per body. Default: `nil`.
        public var inFlightBodyLimit: Int?
        /// Turns a request's URL into the key it is stored under, for URLs that carry rotating
        /// tokens: a closure that drops the `token=` query item, say. The URL comes in key form (see
        /// ``CacheKey``). Default: `nil`, the URL itself.
        public var keyTransform: (@Sendable (String) -> String)?
        /// Where the loader reports its swift-metrics counters. Default: `nil`, none.
        public var metrics: MetricsConfiguration?
        /// The most redirects one load follows (see ``Redirect`` for which); past them, or with
        /// 0, the redirect itself is the answer. Each hop is cached by its own rules under its
        /// own URL. Default: 20, as OkHttp and browsers.
        public var maximumRedirects: Int

        /// Creates a configuration; every parameter defaults to the value its property names.
        public init(
            rules: CacheRules = .privateCache,
            policy: CachePolicy = .useProtocolCachePolicy,
            maximumConnectionsPerHost: Int = 6,
            memoryCostLimit: Int? = nil,
            maximumEntrySize: Int? = nil,
            streamingThreshold: Int = 8 << 20,
            keyTransform: (@Sendable (String) -> String)? = nil,
            metrics: MetricsConfiguration? = nil,
            maximumRedirects: Int = 20,
            inFlightBodyLimit: Int? = nil
        ) {
            self.rules = rules
            self.policy = policy
            self.maximumConnectionsPerHost = maximumConnectionsPerHost
            self.memoryCostLimit = memoryCostLimit
            self.maximumEntrySize = maximumEntrySize
            self.streamingThreshold = streamingThreshold
            self.keyTransform = keyTransform
            self.metrics = metrics
            self.maximumRedirects = maximumRedirects
            self.inFlightBodyLimit = inFlightBodyLimit
        }

        func validate() throws(CacheError) {
            guard self.maximumConnectionsPerHost > 0 else {
                throw .invalidConfiguration(
                    "maximumConnectionsPerHost must be greater than 0 (got \(self.maximumConnectionsPerHost))."
                )
            }
            if let limit = self.memoryCostLimit, limit < 0 {
                throw .invalidConfiguration("memoryCostLimit must not be negative (got \(limit)).")
            }
            guard self.streamingThreshold >= 0 else {
                throw .invalidConfiguration("streamingThreshold must not be negative (got \(self.streamingThreshold)).")
            }
            guard self.maximumRedirects >= 0 else {
                throw .invalidConfiguration("maximumRedirects must not be negative (got \(self.maximumRedirects)).")
            }
            if let limit = self.inFlightBodyLimit, limit < 0 {
                throw .invalidConfiguration("inFlightBodyLimit must not be negative (got \(limit)).")
            }
            if let size = self.maximumEntrySize, size < 0 {
                throw .invalidConfiguration("maximumEntrySize must not be negative (got \(size)).")
            }
        }
    }

    /// How urgent a load is: among the requests waiting for a host, higher goes first.
    public enum Priority: Int, Sendable, Hashable, Comparable, CaseIterable {
        /// Below ``low``.
        case veryLow
        /// For work ahead of need: the default of ``ResourceLoader/prefetch(_:priority:)``.
        case low
        /// The default of a load.
        case normal
        /// Above ``normal``.
        case high
        /// The most urgent.
        case veryHigh

        /// Whether `lhs` is less urgent than `rhs`.
        public static func < (lhs: Priority, rhs: Priority) -> Bool {
            lhs.rawValue < rhs.rawValue
        }
    }
}
