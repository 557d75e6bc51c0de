extension MemoryCache {
    /// The limits and behaviour of a ``MemoryCache``.
    ///
    /// ```swift
    /// var configuration = MemoryCache<URL, Bitmap>.Configuration()
    /// configuration.costLimit = 256 << 20  // 256 MiB of decoded pixels
    /// configuration.timeToLive = .seconds(300)
    /// let cache = try MemoryCache<URL, Bitmap>(configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        /// The most total cost the cache holds. When a call returns, the sum of the costs of the
        /// entries is at most this.
        ///
        /// Default: 20 % of the memory available to the process (physical memory, or the cgroup
        /// limit when lower), 10 % on machines with 512 MiB or less, and at most 512 MiB.
        public var costLimit: Int

        /// The most entries the cache holds. Default: `Int.max` (no limit besides cost).
        public var countLimit: Int

        /// The largest share of ``costLimit`` that one entry may take; a value whose cost is
        /// above `costLimit × maximumEntryShare` is not kept, so that one huge value cannot
        /// flush the whole cache. Must be greater than 0 and at most 1. Default: 0.1 (10 %).
        public var maximumEntryShare: Double

        /// How long an entry stays valid after it is set, unless the set names its own
        /// time-to-live. Default: `nil` (entries do not expire).
        public var timeToLive: Duration?

        /// Whether the cache trims itself when the operating system reports memory pressure:
        /// half of its cost on a warning, everything on a critical notice.
        ///
        /// The notifications come from Dispatch on Apple platforms. Linux has no such
        /// notification in Dispatch; there, call ``MemoryCache/respond(to:)`` from your own
        /// monitor. Default: `true`.
        public var isTrimmingOnMemoryPressure: Bool

        /// Where to report swift-metrics counters and gauges, or `nil` to report none.
        ///
        /// With a label `p`, the cache reports the counters `p.hits`, `p.misses`,
        /// `p.insertions` and `p.evictions` (with a `reason` dimension of `cost`, `count`,
        /// `expiry` or `pressure`), and the gauges `p.cost` and `p.count`. Default: `nil`.
        public var metrics: MetricsConfiguration?

        /// Creates a configuration; every parameter defaults to the value its property names.
        public init(
            costLimit: Int? = nil,
            countLimit: Int = .max,
            maximumEntryShare: Double = 0.1,
            timeToLive: Duration? = nil,
            isTrimmingOnMemoryPressure: Bool = true,
            metrics: MetricsConfiguration? = nil
        ) {
            self.costLimit = costLimit ?? SystemMemory.defaultCostLimit(forAvailableMemory: SystemMemory.available)
            self.countLimit = countLimit
            self.maximumEntryShare = maximumEntryShare
            self.timeToLive = timeToLive
            self.isTrimmingOnMemoryPressure = isTrimmingOnMemoryPressure
            self.metrics = metrics
        }

        /// Throws if a value is out of its range.
        func validate() throws(CacheError) {
            guard self.costLimit > 0 else {
                throw .invalidConfiguration("costLimit must be greater than 0 (got \(self.costLimit)).")
            }
            guard self.countLimit > 0 else {
                throw .invalidConfiguration("countLimit must be greater than 0 (got \(self.countLimit)).")
            }
            guard self.maximumEntryShare > 0, self.maximumEntryShare <= 1 else {
                throw .invalidConfiguration(
                    "maximumEntryShare must be greater than 0 and at most 1 (got \(self.maximumEntryShare))."
                )
            }
            if let timeToLive = self.timeToLive, timeToLive <= .zero {
                throw .invalidConfiguration("timeToLive must be positive or nil (got \(timeToLive)).")
            }
        }
    }
}
