import CachalotTesting
import Testing

@testable import Cachalot

@Suite("MemoryCache")
struct MemoryCacheTests {
    typealias Cache = MemoryCache<Int, Int>

    func makeCache(
        costLimit: Int = 1_000,
        countLimit: Int = .max,
        share: Double = 0.1,
        timeToLive: Duration? = nil,
        clock: ManualClock = ManualClock()
    ) throws -> Cache {
        try Cache(
            configuration: .init(
                costLimit: costLimit,
                countLimit: countLimit,
                maximumEntryShare: share,
                timeToLive: timeToLive
            ),
            clock: clock
        )
    }

    @Test("a set value is returned by get, and counted in count and cost")
    func storesAndReturnsValues() throws {
        let cache = try self.makeCache()
        try cache.set(10, forKey: 1, cost: 5)
        try cache.set(20, forKey: 2, cost: 7)
        #expect(cache.value(forKey: 1) == 10)
        #expect(cache[2] == 20)
        #expect(cache.value(forKey: 3) == nil)
        #expect(cache.count == 2)
        #expect(cache.totalCost == 12)
    }

    @Test("setting a key again replaces its value and its cost")
    func replacingUpdatesValueAndCost() throws {
        let cache = try self.makeCache()
        try cache.set(10, forKey: 1, cost: 5)
        try cache.set(11, forKey: 1, cost: 50)
        #expect(cache.value(forKey: 1) == 11)
        #expect(cache.count == 1)
        #expect(cache.totalCost == 50)
        #expect(cache.invariantViolations().isEmpty)
    }

    @Test("removeValue returns the removed value and the key is gone")
    func removeValueReturnsValue() throws {
        let cache = try self.makeCache()
        try cache.set(10, forKey: 1, cost: 5)
        #expect(cache.removeValue(forKey: 1) == 10)
        #expect(cache.removeValue(forKey: 1) == nil)
        #expect(cache.value(forKey: 1) == nil)
        #expect(cache.totalCost == 0)
    }

    @Test("removeAll empties the cache and keeps the counters")
    func removeAllKeepsCounters() throws {
        let cache = try self.makeCache()
        for key in 0..<100 { try cache.set(key, forKey: key) }
        _ = cache.value(forKey: 5)
        cache.removeAll()
        #expect(cache.count == 0)
        #expect(cache.totalCost == 0)
        #expect(cache.value(forKey: 5) == nil)
        let statistics = cache.statistics
        #expect(statistics.hits == 1)
        #expect(statistics.misses == 1)
        #expect(statistics.insertions == 100)
        #expect(statistics.evictions.total == 0)
        #expect(cache.invariantViolations().isEmpty)
    }

    @Test("the cost limit holds when every set returns")
    func costLimitHolds() throws {
        let cache = try self.makeCache(costLimit: 1_000)
        var random = SeededGenerator(seed: 1)
        for key in 0..<5_000 {
            try cache.set(key, forKey: key, cost: Int.random(in: 0...100, using: &random))
            #expect(cache.totalCost <= 1_000)
        }
        #expect(cache.statistics.evictions.cost > 0)
        #expect(cache.invariantViolations().isEmpty)
    }

    @Test("the count limit holds when every set returns")
    func countLimitHolds() throws {
        let cache = try self.makeCache(costLimit: 1 << 40, countLimit: 700)
        for key in 0..<5_000 {
            try cache.set(key, forKey: key)
            #expect(cache.count <= 700)
        }
        #expect(cache.count == 700)
        #expect(cache.statistics.evictions.count == 4_300)
        #expect(cache.invariantViolations().isEmpty)
    }

    @Test("a value above the maximum entry share is not kept, and the old value goes too")
    func oversizedValueIsNotKept() throws {
        let cache = try self.makeCache(costLimit: 1_000, share: 0.1)
        try cache.set(1, forKey: 1, cost: 100)
        #expect(cache.value(forKey: 1) == 1)
        try cache.set(2, forKey: 1, cost: 101)
        #expect(cache.value(forKey: 1) == nil)
        #expect(cache.totalCost == 0)
    }

    @Test("a negative cost is an error and leaves the cache unchanged")
    func negativeCostThrows() throws {
        let cache = try self.makeCache()
        try cache.set(1, forKey: 1, cost: 3)
        #expect(throws: CacheError.self) { try cache.set(2, forKey: 1, cost: -1) }
        do {
            try cache.set(2, forKey: 1, cost: -1)
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains("negative"))
        }
        #expect(cache.value(forKey: 1) == 1)
        #expect(cache.totalCost == 3)
    }

    @Test(
        "an invalid configuration is rejected with a clear error",
        arguments: [
            Cache.Configuration(costLimit: 0),
            Cache.Configuration(costLimit: -5),
            Cache.Configuration(costLimit: 10, countLimit: 0),
            Cache.Configuration(costLimit: 10, countLimit: -1),
            Cache.Configuration(costLimit: 10, maximumEntryShare: 0),
            Cache.Configuration(costLimit: 10, maximumEntryShare: 1.5),
            Cache.Configuration(costLimit: 10, maximumEntryShare: .nan),
            Cache.Configuration(costLimit: 10, timeToLive: .zero),
            Cache.Configuration(costLimit: 10, timeToLive: .seconds(-1)),
        ]
    )
    func invalidConfigurationThrows(configuration: Cache.Configuration) {
        #expect {
            _ = try Cache(configuration: configuration)
        } throws: { error in
            (error as? CacheError)?.code == .invalidConfiguration
        }
    }

    @Test("a time-to-live that is not positive is an error")
    func invalidTimeToLiveThrows() throws {
        let cache = try self.makeCache()
        #expect(throws: CacheError.self) { try cache.set(1, forKey: 1, timeToLive: .zero) }
        #expect(cache.count == 0)
    }

    @Test("the default cost limit is 20 % of memory, 10 % at 512 MiB or less, capped at 512 MiB")
    func defaultCostLimit() {
        #expect(SystemMemory.defaultCostLimit(forAvailableMemory: 256 << 20) == Int((256 << 20) / 100 * 10))
        #expect(SystemMemory.defaultCostLimit(forAvailableMemory: 512 << 20) == Int((512 << 20) / 100 * 10))
        #expect(SystemMemory.defaultCostLimit(forAvailableMemory: 1 << 30) == Int((1 << 30) / 100 * 20))
        #expect(SystemMemory.defaultCostLimit(forAvailableMemory: 24 << 30) == 512 << 20)
        #expect(Cache.Configuration().costLimit > 0)
        #expect(Cache.Configuration().costLimit <= 512 << 20)
    }

    @Test("shards are fewer when an entry may take a large share or the count limit is small")
    func shardCount() {
        #expect(Cache.shardCount(for: .init(costLimit: 1_000)) == 8)
        #expect(Cache.shardCount(for: .init(costLimit: 1_000, maximumEntryShare: 0.5)) == 2)
        #expect(Cache.shardCount(for: .init(costLimit: 1_000, maximumEntryShare: 1)) == 1)
        #expect(Cache.shardCount(for: .init(costLimit: 1_000, countLimit: 200)) == 2)
        #expect(Cache.shardCount(for: .init(costLimit: 1_000, countLimit: 10)) == 1)
    }

    // MARK: - Expiry

    @Test("an entry expires after the default time-to-live, measured by the injected clock")
    func defaultTimeToLive() throws {
        let clock = ManualClock()
        let cache = try self.makeCache(timeToLive: .seconds(60), clock: clock)
        try cache.set(1, forKey: 1)
        clock.advance(by: .seconds(59))
        #expect(cache.value(forKey: 1) == 1)
        clock.advance(by: .seconds(1))
        #expect(cache.value(forKey: 1) == nil)
        let statistics = cache.statistics
        #expect(statistics.hits == 1)
        #expect(statistics.misses == 1)
        #expect(statistics.evictions.expiry == 1)
        #expect(statistics.count == 0)
    }

    @Test("a time-to-live given to set overrides the default")
    func perEntryTimeToLive() throws {
        let clock = ManualClock()
        let cache = try self.makeCache(timeToLive: .seconds(60), clock: clock)
        try cache.set(1, forKey: 1, timeToLive: .seconds(5))
        try cache.set(2, forKey: 2, timeToLive: .seconds(600))
        clock.advance(by: .seconds(5))
        #expect(cache.value(forKey: 1) == nil)
        clock.advance(by: .seconds(100))
        #expect(cache.value(forKey: 2) == 2)
    }

    @Test("a time-to-live of a thousand years keeps the entry: the clock's ticks do not wrap around")
    func longTimeToLive() throws {
        let clock = ManualClock()
        let cache = try self.makeCache(clock: clock)
        // Not at the clock's start, where the ticks are 0 and nothing can overflow.
        clock.advance(by: .seconds(86_400))
        try cache.set(1, forKey: 1, timeToLive: .seconds(1_000 * 365 * 86_400))
        clock.advance(by: .seconds(86_400))
        #expect(cache.value(forKey: 1) == 1)
    }

    @Test("setting a key again restarts its time-to-live")
    func replacingRestartsTimeToLive() throws {
        let clock = ManualClock()
        let cache = try self.makeCache(clock: clock)
        try cache.set(1, forKey: 1, timeToLive: .seconds(10))
        clock.advance(by: .seconds(8))
        try cache.set(2, forKey: 1)
        clock.advance(by: .seconds(8))
        #expect(cache.value(forKey: 1) == 2)
        #expect(cache.invariantViolations().isEmpty)
    }

    @Test("removeExpired removes exactly the expired entries and counts them")
    func removeExpired() throws {
        let clock = ManualClock()
        let cache = try self.makeCache(clock: clock)
        for key in 0..<50 { try cache.set(key, forKey: key, timeToLive: .seconds(10)) }
        for key in 50..<80 { try cache.set(key, forKey: key) }
        clock.advance(by: .seconds(10))
        cache.removeExpired()
        #expect(cache.count == 30)
        #expect(cache.statistics.evictions.expiry == 50)
        #expect(cache.value(forKey: 60) == 60)
        #expect(cache.invariantViolations().isEmpty)
    }

    @Test("contains sees expiry but counts neither hit nor miss")
    func containsCountsNothing() throws {
        let clock = ManualClock()
        let cache = try self.makeCache(clock: clock)
        try cache.set(1, forKey: 1, timeToLive: .seconds(1))
        #expect(cache.contains(1))
        #expect(!cache.contains(2))
        clock.advance(by: .seconds(1))
        #expect(!cache.contains(1))
        #expect(cache.statistics.hits == 0)
        #expect(cache.statistics.misses == 0)
    }

    @Test("expired entries are evicted before live ones, and counted as expiry")
    func expiredEntriesGoFirst() throws {
        let clock = ManualClock()
        let cache = try self.makeCache(costLimit: 1 << 40, countLimit: 64, clock: clock)
        for key in 0..<32 { try cache.set(key, forKey: key, timeToLive: .seconds(1)) }
        for key in 32..<64 { try cache.set(key, forKey: key) }
        clock.advance(by: .seconds(1))
        for key in 64..<96 { try cache.set(key, forKey: key) }
        let statistics = cache.statistics
        #expect(statistics.evictions.expiry == 32)
        #expect(statistics.evictions.count == 0)
        #expect((32..<96).allSatisfy { cache.contains($0) })
    }

    // MARK: - Trimming

    @Test("trim evicts until the total cost is at most the target, as cost evictions")
    func trimToCost() throws {
        let cache = try self.makeCache(costLimit: 10_000)
        for key in 0..<1_000 { try cache.set(key, forKey: key, cost: 10) }
        try cache.trim(toCost: 2_500)
        #expect(cache.totalCost <= 2_500)
        #expect(cache.totalCost >= 2_000)
        #expect(cache.statistics.evictions.cost == 1_000 - cache.count)
        #expect(throws: CacheError.self) { try cache.trim(toCost: -1) }
        try cache.trim(toCost: 0)
        #expect(cache.count == 0)
        #expect(cache.invariantViolations().isEmpty)
    }

    @Test("memory pressure halves the cache on a warning and empties it when critical")
    func memoryPressure() throws {
        let cache = try self.makeCache(costLimit: 100_000)
        for key in 0..<1_000 { try cache.set(key, forKey: key, cost: 10) }
        #expect(cache.totalCost == 10_000)
        cache.respond(to: .warning)
        // Each of the 8 shards halves its own cost, rounding down to whole entries of cost 10.
        #expect(cache.totalCost <= 5_000)
        #expect(cache.totalCost >= 5_000 - 8 * 10)
        cache.respond(to: .critical)
        #expect(cache.count == 0)
        let statistics = cache.statistics
        #expect(statistics.evictions.pressure == 1_000)
        #expect(statistics.evictions.cost == 0)
    }

    // MARK: - Policy

    @Test("keys read often survive a scan of one-time keys")
    func scanResistance() throws {
        let cache = try self.makeCache(costLimit: 1 << 40, countLimit: 1_024)
        for round in 0..<3 {
            for key in 0..<200 {
                if round == 0 { try cache.set(key, forKey: key) } else { _ = cache.value(forKey: key) }
            }
        }
        for key in 1_000..<21_000 { try cache.set(key, forKey: key) }
        let survivors = (0..<200).filter { cache.contains($0) }.count
        // An LRU would keep none of them; S3-FIFO keeps the read keys in its main queue.
        #expect(survivors >= 190)
    }

    @Test("a key evicted from the small queue and set again goes straight to the main queue")
    func ghostAdmitsReturningKeys() throws {
        let cache = try self.makeCache(costLimit: 1 << 40, countLimit: 64)
        try cache.set(0, forKey: 0)
        for key in 1..<200 { try cache.set(key, forKey: key) }
        #expect(!cache.contains(0))
        try cache.set(0, forKey: 0)
        for key in 200..<250 { try cache.set(key, forKey: key) }
        // A new key that was never read would have left through the small queue by now.
        #expect(cache.contains(0))
    }

    // MARK: - Reads without the lock

    @Test("hits on entries read often, and misses, are counted exactly")
    func lockFreeHitsAreCounted() throws {
        let cache = try self.makeCache(costLimit: 1 << 40)
        for key in 0..<100 { try cache.set(key, forKey: key) }
        // The first three reads of a key record its reads under the lock; later ones need no lock.
        for _ in 0..<10 {
            for key in 0..<100 { #expect(cache.value(forKey: key) == key) }
        }
        for key in 100..<150 { #expect(cache.value(forKey: key) == nil) }
        let statistics = cache.statistics
        #expect(statistics.hits == 1_000)
        #expect(statistics.misses == 50)
    }

    @Test("an expired entry is not returned, even when its reads need no recording")
    func expiredEntryIsNotReturnedWithoutLock() throws {
        let clock = ManualClock()
        let cache = try self.makeCache(clock: clock)
        try cache.set(1, forKey: 1, timeToLive: .seconds(10))
        for _ in 0..<5 { #expect(cache.value(forKey: 1) == 1) }
        clock.advance(by: .seconds(10))
        #expect(cache.value(forKey: 1) == nil)
        #expect(cache.statistics.evictions.expiry == 1)
        #expect(cache.count == 0)
    }

    @Test("a value replaced after its reads saturated is read as the new value")
    func replacedValueIsReadWithoutLock() throws {
        let cache = try self.makeCache()
        try cache.set(1, forKey: 7)
        for _ in 0..<5 { _ = cache.value(forKey: 7) }
        try cache.set(2, forKey: 7)
        #expect(cache.value(forKey: 7) == 2)
        cache.removeValue(forKey: 7)
        #expect(cache.value(forKey: 7) == nil)
    }

    // MARK: - Statistics

    @Test("statistics count every hit, miss, insertion and eviction exactly")
    func statisticsAreExact() throws {
        let cache = try self.makeCache(costLimit: 1 << 40, countLimit: 64)
        for key in 0..<100 { try cache.set(key, forKey: key) }
        var hits = 0
        var misses = 0
        for key in 0..<150 {
            if cache.value(forKey: key) == nil { misses += 1 } else { hits += 1 }
        }
        cache.removeValue(forKey: 99)
        let statistics = cache.statistics
        #expect(statistics.hits == hits)
        #expect(statistics.misses == misses)
        #expect(hits == 64)
        #expect(statistics.insertions == 100)
        #expect(statistics.evictions.count == 36)
        #expect(statistics.count == 63)
        #expect(statistics.totalCost == 63)
        #expect(statistics.hitRatio == Double(hits) / 150)
    }
}
