import Cachalot
import Foundation

// Compares the hit ratio of Cachalot's MemoryCache with an LRU and a FIFO (the policy of the
// shared tier on PostgreSQL) of the same capacity on the workloads of issue #2, and prints a
// Markdown table. Every entry costs 1 and the caches are bounded by count, as in the published
// evaluations of SIEVE, S3-FIFO and W-TinyLFU.

let workloads: [() -> Workload] = [
    { .zipf(alpha: 0.8, cacheShare: 0.01, seed: 1) },
    { .zipf(alpha: 0.8, cacheShare: 0.10, seed: 2) },
    { .zipf(alpha: 1.0, cacheShare: 0.01, seed: 3) },
    { .zipf(alpha: 1.0, cacheShare: 0.10, seed: 4) },
    { .shift(cacheShare: 0.01, seed: 5) },
    { .shift(cacheShare: 0.10, seed: 6) },
    { .scans(alpha: 1.0, cacheShare: 0.01, seed: 7) },
    { .scans(alpha: 1.0, cacheShare: 0.10, seed: 8) },
    { .scans(alpha: 0.8, cacheShare: 0.01, seed: 9) },
    { .scans(alpha: 0.8, cacheShare: 0.10, seed: 10) },
]

func lruMisses(_ workload: Workload) -> Int {
    var lru = LRUReference(capacity: workload.capacity)
    return workload.requests.reduce(0) { misses, key in lru.access(key) ? misses : misses + 1 }
}

func fifoMisses(_ workload: Workload) -> Int {
    var fifo = FIFOReference(capacity: workload.capacity)
    return workload.requests.reduce(0) { misses, key in fifo.access(key) ? misses : misses + 1 }
}

func cachalotMisses(_ workload: Workload) throws -> Int {
    let cache = try MemoryCache<Int, Int>(
        configuration: .init(costLimit: .max, countLimit: workload.capacity)
    )
    var misses = 0
    for key in workload.requests where cache.value(forKey: key) == nil {
        misses += 1
        try cache.set(key, forKey: key)
    }
    return misses
}

func percent(_ value: Double) -> String {
    String(format: "%.1f %%", value * 100)
}

print("| workload | requests | LRU hits | FIFO hits | Cachalot (S3-FIFO) hits | Cachalot: fewer misses than LRU |")
print("|---|---:|---:|---:|---:|---:|")
for make in workloads {
    let workload = make()
    let lru = lruMisses(workload)
    let fifo = fifoMisses(workload)
    let cachalot = try cachalotMisses(workload)
    let total = Double(workload.requests.count)
    let reduction = Double(lru - cachalot) / Double(lru)
    print(
        "| \(workload.name) | \(workload.requests.count) | \(percent(1 - Double(lru) / total)) "
            + "| \(percent(1 - Double(fifo) / total)) | \(percent(1 - Double(cachalot) / total)) "
            + "| \(percent(reduction)) |"
    )
}
