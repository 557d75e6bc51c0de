import Cachalot
import Foundation

// Compares the hit ratio of Cachalot's MemoryCache with an LRU and a FIFO (the policy of the
// shared tier on PostgreSQL) of the same capacity on the workloads of issue #2, and prints a
// Markdown table. Every entry costs 1 and the caches are bounded by count, as in the published
// evaluations of SIEVE, S3-FIFO and W-TinyLFU.
//
// Usage: HitRatio [--csv FILE]
//
// With `--csv FILE` it also sweeps the cache's size (0.1 % to 30 % of the keys) on each kind of
// workload, prints that table too, and writes one line per workload, size and policy to FILE
// for `Benchmarks/plot`.

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

/// The sweep's workloads: the same requests at every size. The seeds are those of the 1 % rows
/// above, so the sweep's 1 % points repeat them.
let sweptWorkloads: [(label: String, make: () -> Workload)] = [
    ("Zipf α = 0.8", { .zipf(alpha: 0.8, cacheShare: 0.01, seed: 1) }),
    ("Zipf α = 1.0", { .zipf(alpha: 1.0, cacheShare: 0.01, seed: 3) }),
    ("popularity moves halfway, α = 1.0", { .shift(cacheShare: 0.01, seed: 5) }),
    ("Zipf α = 1.0 with scans", { .scans(alpha: 1.0, cacheShare: 0.01, seed: 7) }),
    ("Zipf α = 0.8 with scans", { .scans(alpha: 0.8, cacheShare: 0.01, seed: 9) }),
]

/// The sweep's cache sizes, in per mille of the keys: 0.1 % to 30 %.
let sweptSizes = [1, 3, 10, 30, 100, 300]

func lruMisses(_ requests: [Int], capacity: Int) -> Int {
    var lru = LRUReference(capacity: capacity)
    return requests.reduce(0) { misses, key in lru.access(key) ? misses : misses + 1 }
}

func fifoMisses(_ requests: [Int], capacity: Int) -> Int {
    var fifo = FIFOReference(capacity: capacity)
    return requests.reduce(0) { misses, key in fifo.access(key) ? misses : misses + 1 }
}

func cachalotMisses(_ requests: [Int], capacity: Int) throws -> Int {
    let cache = try MemoryCache<Int, Int>(
        configuration: .init(costLimit: .max, countLimit: capacity)
    )
    var misses = 0
    for key in requests where cache.value(forKey: key) == nil {
        misses += 1
        try cache.set(key, forKey: key)
    }
    return misses
}

func percent(_ value: Double) -> String {
    String(format: "%.1f %%", value * 100)
}

var csvPath: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    guard argument == "--csv", let path = arguments.popFirst() else {
        FileHandle.standardError.write(Data("usage: HitRatio [--csv FILE]\n".utf8))
        exit(64)
    }
    csvPath = path
}

print("| workload | requests | LRU hits | FIFO hits | Cachalot (S3-FIFO) hits | Cachalot: fewer misses than LRU |")
print("|---|---:|---:|---:|---:|---:|")
for make in workloads {
    let workload = make()
    let lru = lruMisses(workload.requests, capacity: workload.capacity)
    let fifo = fifoMisses(workload.requests, capacity: workload.capacity)
    let cachalot = try cachalotMisses(workload.requests, capacity: workload.capacity)
    let total = Double(workload.requests.count)
    let reduction = Double(lru - cachalot) / Double(lru)
    print(
        "| \(workload.name) | \(workload.requests.count) | \(percent(1 - Double(lru) / total)) "
            + "| \(percent(1 - Double(fifo) / total)) | \(percent(1 - Double(cachalot) / total)) "
            + "| \(percent(reduction)) |"
    )
}

if let csvPath {
    var csv = "workload,cache_percent,cache_entries,requests,policy,hit_ratio\n"
    print()
    print("| workload | cache | LRU hits | FIFO hits | Cachalot (S3-FIFO) hits | Cachalot: fewer misses than LRU |")
    print("|---|---:|---:|---:|---:|---:|")
    for (label, make) in sweptWorkloads {
        let requests = make().requests
        let total = Double(requests.count)
        for perMille in sweptSizes {
            let capacity = Workload.keyCount * perMille / 1000
            let misses = [
                ("LRU", lruMisses(requests, capacity: capacity)),
                ("FIFO", fifoMisses(requests, capacity: capacity)),
                ("S3-FIFO", try cachalotMisses(requests, capacity: capacity)),
            ]
            let share = String(format: "%g", Double(perMille) / 10)
            for (policy, count) in misses {
                let ratio = String(format: "%.5f", 1 - Double(count) / total)
                csv += "\"\(label)\",\(share),\(capacity),\(requests.count),\(policy),\(ratio)\n"
            }
            let (lru, fifo, cachalot) = (misses[0].1, misses[1].1, misses[2].1)
            print(
                "| \(label) | \(share) % | \(percent(1 - Double(lru) / total)) "
                    + "| \(percent(1 - Double(fifo) / total)) | \(percent(1 - Double(cachalot) / total)) "
                    + "| \(percent(Double(lru - cachalot) / Double(lru))) |"
            )
        }
    }
    try Data(csv.utf8).write(to: URL(filePath: csvPath))
}
