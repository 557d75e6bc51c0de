import CoreMetrics
import Synchronization

/// A thread-safe cache of ready-to-use values, bounded by cost and count.
///
/// `MemoryCache` keeps values you have already decoded or parsed (images, JSON models) so that
/// the next use costs a hash lookup. Every call is synchronous and runs on the caller's thread:
/// a hit never hops to another thread, queue or actor.
///
/// ```swift
/// let cache = try MemoryCache<URL, Bitmap>()
/// try cache.set(bitmap, forKey: url, cost: bitmap.cost)
/// if let bitmap = cache.value(forKey: url) { show(bitmap) }
/// ```
///
/// **Limits.** The total cost and the number of entries are within the configured limits when
/// each call returns. A value whose cost is above `costLimit × maximumEntryShare` is not kept.
///
/// **Eviction.** The cache evicts with S3-FIFO (see <doc:MemoryTier>),
/// which keeps more hits than LRU on skewed workloads and is not flushed by one-time scans.
///
/// **Concurrency.** The entries are split into up to eight shards by key hash, each with its own
/// lock and an equal part of the limits, so the limits hold at every instant. A hit does not take
/// the lock and writes no memory that another thread reads, so threads reading the cache do not
/// slow each other down; <doc:MemoryTier> tells how readers and writers stay apart.
///
/// **Expiry.** Entries can expire after a time-to-live, measured with the clock you inject.
/// An expired entry is never returned; it is removed when it is found or when it would be
/// evicted, or by ``removeExpired()``.
///
/// `MemoryCache` is `@unchecked Sendable` because it owns the memory of its shards through a
/// pointer; a shard's state changes only under its lock, while no reader is inside it.
public final class MemoryCache<Key: Hashable & Sendable, Value: Sendable>: @unchecked Sendable {
    /// The configuration the cache was created with.
    public let configuration: Configuration

    /// The shards' locks and states, in memory this cache allocates and frees. Reaching a shard
    /// through a pointer costs no reference counting, which threads would otherwise contend on.
    @usableFromInline let locks: UnsafeMutablePointer<ShardLock>
    @usableFromInline let states: UnsafeMutablePointer<MemoryCacheShard<Key, Value>>
    @usableFromInline let shardCount: Int
    @usableFromInline let readers: ReaderCounters
    /// Right shift that turns a hash into a shard index (its top bits).
    @usableFromInline let shardShift: Int
    @usableFromInline let ticks: Ticks
    /// Ticks added to the current reading for the default time-to-live, or `nil`.
    @usableFromInline let defaultTimeToLive: Int64?
    @usableFromInline let maximumEntryCost: Int
    @usableFromInline let metrics: MemoryCacheMetrics?

    /// Creates a cache.
    ///
    /// - Parameters:
    ///   - configuration: The limits and behaviour; see ``Configuration`` for the defaults.
    ///   - clock: The clock that measures time-to-live. Default: `ContinuousClock()`. Tests pass
    ///     a manual clock so that they never sleep.
    /// - Throws: ``CacheError/Code/invalidConfiguration`` if a limit is zero or negative, the
    ///   entry share is not in (0, 1], or the time-to-live is not positive.
    public init(
        configuration: Configuration = Configuration(),
        clock: some Clock<Duration> = ContinuousClock()
    ) throws(CacheError) {
        try configuration.validate()
        self.configuration = configuration
        self.ticks = Ticks(clock)
        self.defaultTimeToLive = configuration.timeToLive.map(Ticks.nanoseconds)
        self.maximumEntryCost = Int(Double(configuration.costLimit) * configuration.maximumEntryShare)

        let shardCount = Self.shardCount(for: configuration)
        self.shardShift = Int.bitWidth - shardCount.trailingZeroBitCount
        self.shardCount = shardCount
        self.readers = ReaderCounters(shardCount: shardCount)
        self.locks = UnsafeMutablePointer<ShardLock>.allocate(capacity: shardCount)
        self.states = UnsafeMutablePointer<MemoryCacheShard<Key, Value>>.allocate(capacity: shardCount)
        for shard in 0..<shardCount {
            (self.locks + shard).initialize(to: ShardLock())
            (self.states + shard).initialize(
                to: MemoryCacheShard(
                    costLimit: Self.part(of: configuration.costLimit, shard: shard, of: shardCount),
                    countLimit: Self.part(of: configuration.countLimit, shard: shard, of: shardCount)
                )
            )
        }
        self.metrics = configuration.metrics.map(MemoryCacheMetrics.init)
        #if canImport(Darwin)
        if configuration.isTrimmingOnMemoryPressure {
            MemoryPressureNotifier.shared.register(ObjectIdentifier(self)) { [weak self] pressure in
                self?.respond(to: pressure)
            }
        }
        #endif
    }

    deinit {
        #if canImport(Darwin)
        MemoryPressureNotifier.shared.unregister(ObjectIdentifier(self))
        #endif
        self.locks.deinitialize(count: self.shardCount)
        self.locks.deallocate()
        self.states.deinitialize(count: self.shardCount)
        self.states.deallocate()
    }

    /// The number of shards: a power of two up to 8, fewer when the limits are small, so that
    /// every shard can hold an entry of the largest allowed cost and a useful number of entries.
    static func shardCount(for configuration: Configuration) -> Int {
        var count = 8
        while count > 1
            && (Double(count) * configuration.maximumEntryShare > 1 || configuration.countLimit / count < 64)
        {
            count /= 2
        }
        return count
    }

    /// Shard `shard`'s part of `limit`: the parts add up to `limit` exactly.
    static func part(of limit: Int, shard: Int, of shardCount: Int) -> Int {
        limit / shardCount + (shard < limit % shardCount ? 1 : 0)
    }

    /// The index of the shard that holds keys with this hash: its top bits.
    @inlinable
    func shardIndex(for hash: Int) -> Int {
        Int(truncatingIfNeeded: UInt(bitPattern: hash) >> UInt(self.shardShift))
    }

    // MARK: - Reading

    /// Returns the value stored for `key`, or `nil` if there is none or it has expired.
    ///
    /// - Complexity: O(1) on average.
    @inlinable
    public func value(forKey key: Key) -> Value? {
        let hash = key.hashValue
        let shard = self.shardIndex(for: hash)
        if let answer = self.valueWithoutLock(forKey: key, hash: hash, shard: shard) {
            return answer
        }
        return self.withExclusiveAccess(toShard: shard) { state in
            state.value(forKey: key, hash: hash, ticks: self.ticks)
        }
    }

    /// The value stored for `key`, or `nil`; the same as ``value(forKey:)``.
    @inlinable
    public subscript(key: Key) -> Value? {
        self.value(forKey: key)
    }

    /// Whether a live value is stored for `key`. Unlike ``value(forKey:)``, this counts neither
    /// a hit nor a miss and does not mark the entry as used.
    public func contains(_ key: Key) -> Bool {
        let hash = key.hashValue
        return self.withExclusiveAccess(toShard: self.shardIndex(for: hash)) { state in
            guard let index = state.find(key, hash: hash) else { return false }
            let expiry = state.entries[Int(index)].expiry
            return expiry == MemoryCacheShard<Key, Value>.never || expiry > self.ticks.read()
        }
    }

    // MARK: - Writing

    /// Stores `value` for `key`, replacing any value stored before, then evicts entries until
    /// the limits hold.
    ///
    /// A value whose cost is above `costLimit × maximumEntryShare` is not kept, and any value
    /// stored before for `key` is removed, so a get never returns an outdated value.
    ///
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: The key to store it under.
    ///   - cost: What the value costs against ``Configuration/costLimit``, such as its size in
    ///     bytes. Default: 1.
    ///   - timeToLive: How long the value stays valid. Default: `nil`, the configuration's
    ///     ``Configuration/timeToLive``.
    /// - Throws: ``CacheError/Code/invalidArgument`` if `cost` is negative or `timeToLive` is
    ///   not positive; the cache is unchanged then.
    /// - Complexity: O(1) on average, plus the evictions it causes.
    @inlinable
    public func set(_ value: Value, forKey key: Key, cost: Int = 1, timeToLive: Duration? = nil) throws(CacheError) {
        guard cost >= 0 else {
            throw .invalidArgument("The cost of a cache entry must not be negative (got \(cost)).")
        }
        let hash = key.hashValue
        guard cost <= self.maximumEntryCost else {
            self.removeValue(forKey: key)
            return
        }
        let lifetime: Int64?
        if let timeToLive {
            guard timeToLive > .zero else {
                throw .invalidArgument("A time-to-live must be positive (got \(timeToLive)).")
            }
            lifetime = Ticks.nanoseconds(timeToLive)
        } else {
            lifetime = self.defaultTimeToLive
        }
        // A time-to-live past what the ticks hold (292 years) never ends; it does not wrap around.
        let expiry =
            lifetime.map { lifetime in
                let (sum, overflows) = self.ticks.read().addingReportingOverflow(lifetime)
                return overflows ? .max : sum
            } ?? .max
        self.withExclusiveAccess(toShard: self.shardIndex(for: hash)) { state in
            state.set(value, forKey: key, hash: hash, cost: cost, expiry: expiry, ticks: self.ticks)
        }
    }

    /// Removes the value stored for `key` and returns it, or `nil` if there was none.
    ///
    /// - Complexity: O(1) on average.
    @discardableResult
    public func removeValue(forKey key: Key) -> Value? {
        let hash = key.hashValue
        return self.withExclusiveAccess(toShard: self.shardIndex(for: hash)) { state in
            state.removeValue(forKey: key, hash: hash)
        }
    }

    /// Removes every entry. Statistics other than the current cost and count are kept.
    public func removeAll() {
        self.forEachShard { state in state.removeAll() }
    }

    /// Removes every entry that `isRemoved` accepts, given its key and value, and returns how
    /// many it removed.
    ///
    /// - Complexity: O(*n*) in the number of entries: for administration (purging a group of
    ///   keys), not for a hot path.
    @discardableResult
    public func removeValues(where isRemoved: (Key, Value) -> Bool) -> Int {
        var removed = 0
        self.forEachShard { state in removed += state.removeValues(where: isRemoved) }
        return removed
    }

    /// Removes every entry whose time-to-live has passed, counting them as expiry evictions.
    public func removeExpired() {
        self.forEachShard { state in state.removeExpired(ticks: self.ticks) }
    }

    /// Evicts entries, in the order the eviction policy would, until the total cost is at most
    /// `cost`. The evictions count as cost evictions.
    ///
    /// - Parameter cost: The total cost to trim to; 0 empties the cache.
    /// - Throws: ``CacheError/Code/invalidArgument`` if `cost` is negative.
    public func trim(toCost cost: Int) throws(CacheError) {
        guard cost >= 0 else {
            throw .invalidArgument("The cost to trim to must not be negative (got \(cost)).")
        }
        self.trim(reason: .cost) { state in
            Int(Double(cost) * Double(state.costLimit) / Double(self.configuration.costLimit))
        }
    }

    /// Trims the cache in response to memory pressure: to half its current cost on a warning,
    /// to nothing on a critical notice. The evictions count as pressure evictions.
    ///
    /// The cache calls this itself where the platform sends notifications (see
    /// ``Configuration/isTrimmingOnMemoryPressure``); call it yourself from your own monitor
    /// elsewhere.
    public func respond(to pressure: MemoryPressure) {
        self.trim(reason: .pressure) { state in pressure == .critical ? 0 : state.totalCost / 2 }
    }

    private func trim(
        reason: MemoryCacheShard<Key, Value>.Reason,
        target: (MemoryCacheShard<Key, Value>) -> Int
    ) {
        self.forEachShard { state in state.trim(toCost: target(state), reason: reason, ticks: self.ticks) }
    }

    // MARK: - Inspecting

    /// The number of entries held now, expired ones not yet removed included.
    public var count: Int {
        self.sumOverShards { state in state.count }
    }

    /// The sum of the costs of the entries held now.
    public var totalCost: Int {
        self.sumOverShards { state in state.totalCost }
    }

    /// What the cache has done since it was created, and what it holds now.
    public var statistics: Statistics {
        (0..<self.shardCount).reduce(Statistics()) { sum, shard in
            var statistics = self.withExclusiveAccess(toShard: shard) { state in state.snapshot }
            let counts = self.readers.counts(ofShard: shard)
            statistics.hits += counts.hits
            statistics.misses += counts.misses
            return sum + statistics
        }
    }

    private func sumOverShards(_ value: (borrowing MemoryCacheShard<Key, Value>) -> Int) -> Int {
        (0..<self.shardCount).reduce(0) { sum, shard in
            sum + self.withExclusiveAccess(toShard: shard) { state in value(state) }
        }
    }

    /// Runs `body` on each shard in turn, with exclusive access.
    private func forEachShard(_ body: (inout MemoryCacheShard<Key, Value>) -> Void) {
        for shard in 0..<self.shardCount {
            self.withExclusiveAccess(toShard: shard, body)
        }
    }
}
