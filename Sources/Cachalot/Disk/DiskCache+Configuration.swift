extension DiskCache {
    /// The limits and behaviour of a ``DiskCache``.
    public struct Configuration: Sendable {
        /// The most space the cache's entry files take together on disk (headers, keys and
        /// metadata included, each file counted in whole allocation units of the file system,
        /// 4 KiB on ext4). When a call returns, the total is at most this. The journal and the
        /// directories come on top. Default: 256 MiB.
        public var sizeLimit: Int

        /// The most entries the cache holds, or `nil` for no limit besides size. Default: `nil`.
        public var countLimit: Int?

        /// How long after it was stored an entry is still returned, or `nil` to keep entries
        /// until evicted. An older entry is removed when it is read or when the cache opens.
        /// Default: `nil`.
        public var maximumAge: Duration?

        /// Whether each write is made durable with `fsync` of the file and its directory before
        /// the call returns. Without it a write survives a crash of the process but perhaps not
        /// one of the machine; a get never returns a damaged entry either way. Each fsync costs
        /// about a millisecond here. Default: `false`.
        public var isDurable: Bool

        /// Creates a configuration; every parameter defaults to the value its property names.
        public init(
            sizeLimit: Int = 256 << 20,
            countLimit: Int? = nil,
            maximumAge: Duration? = nil,
            isDurable: Bool = false
        ) {
            self.sizeLimit = sizeLimit
            self.countLimit = countLimit
            self.maximumAge = maximumAge
            self.isDurable = isDurable
        }

        func validate() throws(CacheError) {
            guard self.sizeLimit > 0 else {
                throw .invalidConfiguration("sizeLimit must be greater than 0 (got \(self.sizeLimit)).")
            }
            if let countLimit = self.countLimit, countLimit <= 0 {
                throw .invalidConfiguration("countLimit must be greater than 0 or nil (got \(countLimit)).")
            }
            if let maximumAge = self.maximumAge, maximumAge <= .zero {
                throw .invalidConfiguration("maximumAge must be positive or nil (got \(maximumAge)).")
            }
        }
    }
}
