import CachalotTesting
import CoreMetrics
import MetricsTestKit
import Testing

@testable import Cachalot

@Suite("MemoryCache against a model")
struct MemoryCacheModelTests {
    /// Runs long random sequences of every operation against a dictionary of the values last
    /// set, and after every call checks that the limits hold, that the internal structures
    /// agree, and that every value returned is the one last set for its key.
    @Test(
        "random operations keep the limits and never return a wrong value",
        arguments: [
            (seed: UInt64(1), costLimit: 2_000, countLimit: Int.max, share: 0.1),
            (seed: 2, costLimit: 2_000, countLimit: 150, share: 0.1),
            (seed: 3, costLimit: 500, countLimit: 40, share: 1.0),
            (seed: 4, costLimit: 100_000, countLimit: 1_000, share: 0.05),
        ]
    )
    func randomOperationsMatchModel(seed: UInt64, costLimit: Int, countLimit: Int, share: Double) throws {
        let clock = ManualClock()
        let cache = try MemoryCache<Int, Int>(
            configuration: .init(costLimit: costLimit, countLimit: countLimit, maximumEntryShare: share),
            clock: clock
        )
        let maximumEntryCost = Int(Double(costLimit) * share)
        var model: [Int: Int] = [:]
        var random = SeededGenerator(seed: seed)
        var version = 0
        for step in 0..<30_000 {
            let key = Int.random(in: 0..<400, using: &random)
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<45:
                version += 1
                let cost = Int.random(in: 0...(maximumEntryCost + maximumEntryCost / 8), using: &random)
                let timeToLive: Duration? =
                    Bool.random(using: &random) ? nil : .seconds(Int.random(in: 1...20, using: &random))
                try cache.set(version, forKey: key, cost: cost, timeToLive: timeToLive)
                model[key] = cost <= maximumEntryCost ? version : nil
            case 45..<85:
                let value = cache.value(forKey: key)
                if let value {
                    #expect(value == model[key], "step \(step): get returned an outdated or foreign value")
                } else {
                    model[key] = nil  // evicted or expired: it must never come back
                }
            case 85..<93:
                let value = cache.removeValue(forKey: key)
                if let value { #expect(value == model[key], "step \(step): remove returned a wrong value") }
                model[key] = nil
            case 93..<97:
                clock.advance(by: .seconds(Int.random(in: 1...5, using: &random)))
            case 97..<99:
                let target = Int.random(in: 0...costLimit, using: &random)
                try cache.trim(toCost: target)
                #expect(cache.totalCost <= target)
            default:
                if Int.random(in: 0..<20, using: &random) == 0 {
                    cache.removeAll()
                    model.removeAll()
                } else {
                    cache.removeExpired()
                }
            }
            if model[key] == nil { #expect(!cache.contains(key), "step \(step): a removed key is still there") }
            #expect(cache.totalCost <= costLimit)
            #expect(cache.count <= countLimit)
            if step % 50 == 0 {
                let violations = cache.invariantViolations()
                #expect(violations.isEmpty, "step \(step): \(violations)")
                if !violations.isEmpty { return }
            }
        }
        #expect(cache.invariantViolations().isEmpty)
    }

    @Test("many tasks doing mixed operations at once leave a sound cache and exact statistics")
    func concurrentOperations() async throws {
        let cache = try MemoryCache<Int, Int>(configuration: .init(costLimit: 5_000, countLimit: 600))
        let tasks = 16
        let operations = 20_000
        let gets = await withTaskGroup(of: Int.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    var random = SeededGenerator(seed: UInt64(task))
                    var gets = 0
                    for _ in 0..<operations {
                        let key = Int.random(in: 0..<2_000, using: &random)
                        switch Int.random(in: 0..<10, using: &random) {
                        case 0..<4:
                            // The value names its key, so a read of another key's value shows.
                            try? cache.set(
                                key * 1_000 + task,
                                forKey: key,
                                cost: Int.random(in: 1...40, using: &random)
                            )
                        case 4..<9:
                            gets += 1
                            if let value = cache.value(forKey: key) { #expect(value / 1_000 == key) }
                        default:
                            if let value = cache.removeValue(forKey: key) { #expect(value / 1_000 == key) }
                        }
                    }
                    return gets
                }
            }
            return await group.reduce(0, +)
        }
        let statistics = cache.statistics
        #expect(statistics.hits + statistics.misses == gets)
        #expect(statistics.totalCost <= 5_000)
        #expect(statistics.count <= 600)
        #expect(cache.invariantViolations().isEmpty)
    }

    @Test("readers of hot keys racing writers never see another key's value, and counts add up")
    func readersRaceWriters() async throws {
        let cache = try MemoryCache<Int, Int>(configuration: .init(costLimit: 1 << 40, countLimit: 4_096))
        for key in 0..<64 { try cache.set(key * 1_000, forKey: key) }
        let reads = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var random = SeededGenerator(seed: UInt64(100 + task))
                    var reads = 0
                    for step in 0..<30_000 {
                        let key = Int.random(in: 0..<64, using: &random)
                        if task < 2, step % 3 == 0 {
                            // Writers: replace, remove and put back hot keys.
                            if step % 9 == 0 {
                                cache.removeValue(forKey: key)
                            } else {
                                try? cache.set(key * 1_000 + step % 1_000, forKey: key)
                            }
                        } else {
                            reads += 1
                            if let value = cache.value(forKey: key) { #expect(value / 1_000 == key) }
                        }
                    }
                    return reads
                }
            }
            return await group.reduce(0, +)
        }
        let statistics = cache.statistics
        #expect(statistics.hits + statistics.misses == reads)
        #expect(cache.invariantViolations().isEmpty)
    }

    @Test("metrics report hits, misses, insertions, evictions by reason, cost and count")
    func metricsAreReported() throws {
        let metrics = TestMetrics()
        let clock = ManualClock()
        let cache = try MemoryCache<Int, Int>(
            configuration: .init(costLimit: 1 << 40, countLimit: 64, metrics: .init(label: "test", factory: metrics)),
            clock: clock
        )
        for key in 0..<100 { try cache.set(key, forKey: key, cost: 2) }
        // Five reads each: the later ones are counted without the lock, and must be reported too.
        for _ in 0..<5 {
            for key in 0..<100 { _ = cache.value(forKey: key) }
        }
        try cache.set(1_000, forKey: 1_000, timeToLive: .seconds(1))
        clock.advance(by: .seconds(1))
        _ = cache.value(forKey: 1_000)
        cache.respond(to: .critical)
        let statistics = cache.statistics
        #expect(try metrics.expectCounter("test.hits").totalValue == Int64(statistics.hits))
        #expect(try metrics.expectCounter("test.misses").totalValue == Int64(statistics.misses))
        #expect(try metrics.expectCounter("test.insertions").totalValue == 101)
        let evictions = statistics.evictions
        #expect(metrics.counterTotal(label: "test.evictions", dimensions: [("reason", "count")]) == evictions.count)
        #expect(metrics.counterTotal(label: "test.evictions", dimensions: [("reason", "expiry")]) == 1)
        // 64 entries, less the expired one that the last get removed.
        #expect(metrics.counterTotal(label: "test.evictions", dimensions: [("reason", "pressure")]) == 63)
        #expect(try metrics.expectGauge("test.count").lastValue == 0)
        #expect(try metrics.expectGauge("test.cost").lastValue == 0)
    }
}
