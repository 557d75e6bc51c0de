extension MemoryCache {
    /// A snapshot of what a ``MemoryCache`` has done since it was created.
    public typealias Statistics = MemoryCacheStatistics
}

/// A snapshot of what a ``MemoryCache`` has done since it was created, and what it holds now.
public struct MemoryCacheStatistics: Hashable, Sendable {
    /// Gets that returned a value.
    public var hits: Int = 0
    /// Gets that returned `nil`, including those that found an expired entry.
    public var misses: Int = 0
    /// Sets that stored a value (new or replacing).
    public var insertions: Int = 0
    /// Entries the cache removed by itself, by reason.
    public var evictions = Evictions()
    /// The sum of the costs of the entries held now.
    public var totalCost: Int = 0
    /// The number of entries held now.
    public var count: Int = 0

    /// The share of gets that were hits, from 0 to 1; 0 when nothing was asked yet.
    public var hitRatio: Double {
        let lookups = self.hits + self.misses
        return lookups == 0 ? 0 : Double(self.hits) / Double(lookups)
    }

    /// Entries removed by the cache itself, by reason. Removals the caller asked for
    /// (``MemoryCache/removeValue(forKey:)``, ``MemoryCache/removeAll()``) are not evictions.
    public struct Evictions: Hashable, Sendable {
        /// Removed to keep the total cost within the cost limit, or by ``MemoryCache/trim(toCost:)``.
        public var cost: Int = 0
        /// Removed to keep the number of entries within the count limit.
        public var count: Int = 0
        /// Removed because their time-to-live had passed.
        public var expiry: Int = 0
        /// Removed in response to memory pressure.
        public var pressure: Int = 0

        /// All evictions.
        public var total: Int { self.cost + self.count + self.expiry + self.pressure }

        static func - (lhs: Evictions, rhs: Evictions) -> Evictions {
            Evictions(
                cost: lhs.cost - rhs.cost,
                count: lhs.count - rhs.count,
                expiry: lhs.expiry - rhs.expiry,
                pressure: lhs.pressure - rhs.pressure
            )
        }

        static func + (lhs: Evictions, rhs: Evictions) -> Evictions {
            Evictions(
                cost: lhs.cost + rhs.cost,
                count: lhs.count + rhs.count,
                expiry: lhs.expiry + rhs.expiry,
                pressure: lhs.pressure + rhs.pressure
            )
        }
    }

    static func + (lhs: Self, rhs: Self) -> Self {
        Self(
            hits: lhs.hits + rhs.hits,
            misses: lhs.misses + rhs.misses,
            insertions: lhs.insertions + rhs.insertions,
            evictions: lhs.evictions + rhs.evictions,
            totalCost: lhs.totalCost + rhs.totalCost,
            count: lhs.count + rhs.count
        )
    }

    /// What changed from `before` to `self`: counters as differences, cost and count as well.
    @usableFromInline
    func change(since before: Self) -> Self {
        Self(
            hits: self.hits - before.hits,
            misses: self.misses - before.misses,
            insertions: self.insertions - before.insertions,
            evictions: self.evictions - before.evictions,
            totalCost: self.totalCost - before.totalCost,
            count: self.count - before.count
        )
    }
}
