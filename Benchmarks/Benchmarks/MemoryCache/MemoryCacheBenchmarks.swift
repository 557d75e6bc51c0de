import Benchmark
import Cachalot
import CachalotTesting
import Dispatch
import Foundation
import Synchronization

// Each iteration does `operations` calls, so times and allocations are per 1,000 calls; the
// report divides. Baselines run in the same process, one after another, on the same keys.

let operations = 1_000
let keyCount = 10_000

/// URL-like keys of about 50 bytes, as an image cache sees them.
let stringKeys = (0..<keyCount).map { "https://images.example.com/photos/\(100_000 + $0).jpg?w=256" }
let intKeys = Array(0..<keyCount)
/// The order of the keys read in one iteration: fixed, random, the same for every subject.
let order: [Int] = {
    var random = SeededGenerator(seed: 42)
    return (0..<operations).map { _ in Int.random(in: 0..<keyCount, using: &random) }
}()

func makeCache<Key: Hashable & Sendable>(_ keys: [Key]) -> MemoryCache<Key, Int> {
    let cache = try! MemoryCache<Key, Int>(configuration: .init(costLimit: 1 << 40))
    for (value, key) in keys.enumerated() { try! cache.set(value, forKey: key) }
    return cache
}

func makeDictionary<Key: Hashable & Sendable>(_ keys: [Key]) -> Mutex<[Key: Int]> {
    Mutex(Dictionary(uniqueKeysWithValues: keys.enumerated().map { ($1, $0) }))
}

/// A box for NSCache, which holds objects only.
final class Box {
    let value: Int
    init(_ value: Int) { self.value = value }
}

/// Each thread's own copies of the keys: threads that share one String object contend on its
/// reference count, which would measure the benchmark rather than the cache.
let threadKeys = (0..<2).map { _ in stringKeys.map { String(decoding: Array($0.utf8), as: UTF8.self) } }

/// Runs `body(thread)` on `threads` threads at once and waits for all of them.
func onThreads(_ threads: Int, _ body: @Sendable (Int) -> Void) {
    if threads == 1 { return body(0) }
    DispatchQueue.concurrentPerform(iterations: threads, execute: body)
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        warmupIterations: 10,
        maxDuration: .seconds(2),
        maxIterations: 20_000
    )

    // MARK: Hits, one thread

    let stringCache = makeCache(stringKeys)
    let stringDictionary = makeDictionary(stringKeys)
    let intCache = makeCache(intKeys)
    let intDictionary = makeDictionary(intKeys)
    let nsKeys = stringKeys.map { $0 as NSString }
    let nsCache = NSCache<NSString, Box>()
    for (value, key) in nsKeys.enumerated() { nsCache.setObject(Box(value), forKey: key) }

    Benchmark("get hit, String key: MemoryCache") { benchmark in
        for index in order { blackHole(stringCache.value(forKey: stringKeys[index])) }
    }
    Benchmark("get hit, String key: Mutex<Dictionary>") { benchmark in
        for index in order { blackHole(stringDictionary.withLock { $0[stringKeys[index]] }) }
    }
    Benchmark("get hit, String key: NSCache") { benchmark in
        for index in order { blackHole(nsCache.object(forKey: nsKeys[index])) }
    }
    Benchmark("get hit, Int key: MemoryCache") { benchmark in
        for index in order { blackHole(intCache.value(forKey: intKeys[index])) }
    }
    Benchmark("get hit, Int key: Mutex<Dictionary>") { benchmark in
        for index in order { blackHole(intDictionary.withLock { $0[intKeys[index]] }) }
    }

    // MARK: Sets

    Benchmark("set existing key, String key: MemoryCache") { benchmark in
        for index in order { try! stringCache.set(index, forKey: stringKeys[index]) }
    }
    Benchmark("set existing key, String key: Mutex<Dictionary>") { benchmark in
        for index in order { stringDictionary.withLock { $0[stringKeys[index]] = index } }
    }
    // A full cache of 5,000 entries that every set must evict from: keys cycle through 10,000.
    let evictingCache = try! MemoryCache<String, Int>(configuration: .init(costLimit: 1 << 40, countLimit: 5_000))
    let cursor = Mutex(0)
    Benchmark("set new key evicting, String key: MemoryCache") { benchmark in
        let start = cursor.withLock { cursor in
            defer { cursor = (cursor + operations) % keyCount }
            return cursor
        }
        for offset in 0..<operations {
            try! evictingCache.set(offset, forKey: stringKeys[(start + offset) % keyCount])
        }
    }

    // MARK: Hits, one thread against two
    //
    // Each iteration times 20 × 1,000 gets on one thread, then the same on each of two threads
    // at once, and records the throughput ratio 2 × time(1 thread) / time(2 threads) × 1,000.
    // Measuring both in one iteration keeps the machine's drift out of the ratio. The private
    // dictionaries share nothing between the threads: they show what this machine allows.

    let privateDictionaries = threadKeys.map { keys in
        Dictionary(uniqueKeysWithValues: keys.enumerated().map { ($1, $0) })
    }
    let cacheScaling = BenchmarkMetric.custom("MemoryCache × 1000", polarity: .prefersLarger, useScalingFactor: false)
    let ceilingScaling = BenchmarkMetric.custom("ceiling × 1000", polarity: .prefersLarger, useScalingFactor: false)
    let lockScaling = BenchmarkMetric.custom(
        "Mutex<Dictionary> × 1000",
        polarity: .prefersLarger,
        useScalingFactor: false
    )
    Benchmark(
        "get hits, 2 threads against 1, String key",
        configuration: .init(
            metrics: [cacheScaling, ceilingScaling, lockScaling],
            maxDuration: .seconds(10),
            maxIterations: 100
        )
    ) { benchmark in
        // The three subjects are measured back to back in every iteration, so that the
        // machine's drift affects them alike; the ceiling shares nothing between the threads.
        benchmark.measurement(
            cacheScaling,
            throughputRatio { thread in
                let keys = threadKeys[thread]
                for _ in 0..<20 { for index in order { blackHole(stringCache.value(forKey: keys[index])) } }
            }
        )
        benchmark.measurement(
            ceilingScaling,
            throughputRatio { thread in
                let (keys, dictionary) = (threadKeys[thread], privateDictionaries[thread])
                for _ in 0..<20 { for index in order { blackHole(dictionary[keys[index]]) } }
            }
        )
        benchmark.measurement(
            lockScaling,
            throughputRatio { thread in
                let keys = threadKeys[thread]
                for _ in 0..<20 {
                    for index in order { blackHole(stringDictionary.withLock { $0[keys[index]] }) }
                }
            }
        )
    }
}

/// Times `work(0)` alone, then `work(0)` and `work(1)` on two threads at once, and returns the
/// throughput ratio of two threads to one, × 1,000.
func throughputRatio(_ work: @Sendable (Int) -> Void) -> Int {
    let clock = ContinuousClock()
    let one = clock.measure { onThreads(1, work) }
    let two = clock.measure { onThreads(2, work) }
    let ratio: Double = one / two * 2
    return Int((ratio * 1_000).rounded())
}
