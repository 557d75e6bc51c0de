import Benchmark
import Cachalot
import CachalotTesting
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Each iteration does `operations` calls on random keys; times are per 100 calls, and the
// report divides. Baselines do the same work with raw POSIX calls in the same process.

let operations = 100
let entrySize = 32 << 10
let body = Data((0..<entrySize).map { UInt8(truncatingIfNeeded: $0) })

/// Random indices in `0..<count`, fixed by the seed.
func order(_ count: Int, seed: UInt64) -> [Int] {
    var random = SeededGenerator(seed: seed)
    return (0..<operations).map { _ in Int.random(in: 0..<count, using: &random) }
}

let keys = (0..<100_000).map { "https://images.example.com/photos/\($0).jpg?w=256" }

/// The key of entry `index`, made once, as the raw baselines' paths are.
func key(_ index: Int) -> String { keys[index] }

/// A cache holding `count` entries of `size` bytes.
func filledCache(_ directory: TemporaryDirectory, count: Int, size: Int) -> DiskCache {
    let cache = try! DiskCache(directory: directory.url, configuration: .init(sizeLimit: 1 << 40))
    let data = Data(count: size)
    for index in 0..<count { try! cache.set(data, forKey: key(index)) }
    return cache
}

/// Reads a whole file the way a careful program would: open, fstat, read, close.
func rawRead(_ path: String) -> Int {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    var status = stat()
    fstat(descriptor, &status)
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: Int(status.st_size), alignment: 8)
    let count = read(descriptor, buffer, Int(status.st_size))
    close(descriptor)
    let data = Data(bytesNoCopy: buffer, count: count, deallocator: .free)
    return data.count
}

/// Reads a file whose size is known, with no fstat: open, read, close. The stricter baseline,
/// for a get that learns the size from its one read (see `EntryFile.firstReadSize`).
func rawReadKnownSize(_ path: String, size: Int) -> Int {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
    let count = read(descriptor, buffer, size)
    close(descriptor)
    let data = Data(bytesNoCopy: buffer, count: count, deallocator: .free)
    return data.count
}

/// Writes a file under a temporary name and renames it into place.
func rawWrite(_ data: Data, to path: String, temporary: String) {
    let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    data.withUnsafeBytes { _ = write(descriptor, $0.baseAddress, $0.count) }
    close(descriptor)
    rename(temporary, path)
}

/// What many tutorials build: a directory of files, listed and sorted by date on every write to
/// find what to delete.
struct NaiveDiskCache {
    let directory: URL
    let sizeLimit: Int

    func set(_ data: Data, forKey key: String) throws {
        let file = self.directory.appendingPathComponent(String(key.hashValue, radix: 16))
        try data.write(to: file)
        let keys: [URLResourceKey] = [.contentModificationDateKey, .fileSizeKey]
        let files = try FileManager.default.contentsOfDirectory(at: self.directory, includingPropertiesForKeys: keys)
        var entries = try files.map { file in
            let values = try file.resourceValues(forKeys: Set(keys))
            return (file, values.contentModificationDate ?? .distantPast, values.fileSize ?? 0)
        }
        entries.sort { $0.1 < $1.1 }
        var total = entries.reduce(0) { $0 + $1.2 }
        for entry in entries where total > self.sizeLimit {
            try FileManager.default.removeItem(at: entry.0)
            total -= entry.2
        }
    }

    func data(forKey key: String) -> Data? {
        try? Data(contentsOf: self.directory.appendingPathComponent(String(key.hashValue, radix: 16)))
    }
}

// Fixtures are globals, so built lazily: each benchmark runs in its own process and builds only
// what it uses, during its warm-up iterations.

let small = try! TemporaryDirectory()
let smallCache = filledCache(small, count: 1_000, size: entrySize)
let rawDirectory = try! TemporaryDirectory()
let rawPaths: [String] = {
    let paths = (0..<1_000).map { rawDirectory.path + "/\($0)" }
    for path in paths { rawWrite(body, to: path, temporary: path + ".tmp") }
    return paths
}()
let reads = order(1_000, seed: 1)
let writes = order(1_000, seed: 2)

let large = try! TemporaryDirectory()
let largeCache = filledCache(large, count: 100_000, size: 1_000)
let mediumDirectory = try! TemporaryDirectory()
let mediumCache = filledCache(mediumDirectory, count: 1_000, size: 1_000)
let largeReads = order(100_000, seed: 3)
let mediumReads = order(1_000, seed: 3)
let smallBody = Data(count: 1_000)

let urlCacheDirectory = try! TemporaryDirectory()
let requests = (0..<1_000).map { URLRequest(url: URL(string: key($0))!) }
let urlCache: URLCache = {
    let cache = URLCache(memoryCapacity: 0, diskCapacity: 1 << 30, diskPath: urlCacheDirectory.path)
    for request in requests {
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: nil)!
        cache.storeCachedResponse(CachedURLResponse(response: response, data: body), for: request)
    }
    return cache
}()

let naiveDirectory = try! TemporaryDirectory()
let naive: NaiveDiskCache = {
    let cache = NaiveDiskCache(directory: naiveDirectory.url, sizeLimit: 1 << 40)
    // Filled directly: filling it through its own set would list the directory 1,000 times.
    for index in 0..<1_000 {
        let path = naiveDirectory.url.appendingPathComponent(String(key(index).hashValue, radix: 16)).path
        rawWrite(body, to: path, temporary: path + ".tmp")
    }
    return cache
}()

/// Times `subject` and `baseline` one after the other, the subject first in odd iterations, and
/// returns the ratio of their times × 1,000.
func timedInAlternatingOrder(_ iteration: Int, _ subject: () -> Void, baseline: () -> Void) -> Int {
    let clock = ContinuousClock()
    let subjectTime: Duration
    let baselineTime: Duration
    if iteration.isMultiple(of: 2) {
        baselineTime = clock.measure(baseline)
        subjectTime = clock.measure(subject)
    } else {
        subjectTime = clock.measure(subject)
        baselineTime = clock.measure(baseline)
    }
    return Int((subjectTime / baselineTime * 1_000).rounded())
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        warmupIterations: 3,
        maxDuration: .seconds(3),
        maxIterations: 2_000
    )

    // MARK: Warm gets of 32 KiB, 1,000 entries

    Benchmark("get 32 KiB, 1,000 entries: DiskCache") { _ in
        for index in reads { blackHole(try! smallCache.data(forKey: key(index))) }
    }
    Benchmark("get 32 KiB: open, fstat, read, close") { _ in
        for index in reads { blackHole(rawRead(rawPaths[index])) }
    }

    // MARK: The same, subject and baseline in one iteration
    //
    // Each iteration times 100 calls of DiskCache and 100 of the raw baseline on the same keys,
    // in alternating order, and records the ratio × 1,000: the machine's drift from one
    // benchmark process to the next stays out of it, and neither side always runs first. Gets
    // and sets are timed in separate benchmarks, so that the writeback of one iteration's writes
    // does not fall on the next iteration's reads.

    let ratio = BenchmarkMetric.custom("ratio × 1000", polarity: .prefersSmaller, useScalingFactor: false)
    let ratioConfiguration = Benchmark.Configuration(metrics: [ratio], warmupIterations: 3, maxDuration: .seconds(5))
    var getIteration = 0
    Benchmark("get 32 KiB against raw POSIX, same iteration: DiskCache", configuration: ratioConfiguration) {
        benchmark in
        getIteration += 1
        let times = timedInAlternatingOrder(getIteration) {
            for index in reads { blackHole(try! smallCache.data(forKey: key(index))) }
        } baseline: {
            for index in reads { blackHole(rawRead(rawPaths[index])) }
        }
        benchmark.measurement(ratio, times)
    }
    var knownSizeIteration = 0
    Benchmark(
        "get 32 KiB against raw POSIX of a known size, same iteration: DiskCache",
        configuration: ratioConfiguration
    ) { benchmark in
        knownSizeIteration += 1
        let times = timedInAlternatingOrder(knownSizeIteration) {
            for index in reads { blackHole(try! smallCache.data(forKey: key(index))) }
        } baseline: {
            for index in reads { blackHole(rawReadKnownSize(rawPaths[index], size: body.count)) }
        }
        benchmark.measurement(ratio, times)
    }
    var setIteration = 0
    Benchmark("set 32 KiB against raw POSIX, same iteration: DiskCache", configuration: ratioConfiguration) {
        benchmark in
        setIteration += 1
        let times = timedInAlternatingOrder(setIteration) {
            for index in writes { try! smallCache.set(body, forKey: key(index)) }
        } baseline: {
            for index in writes { rawWrite(body, to: rawPaths[index], temporary: rawPaths[index] + ".tmp") }
        }
        benchmark.measurement(ratio, times)
    }

    // MARK: Sets of 32 KiB

    Benchmark("set 32 KiB, 1,000 entries: DiskCache") { _ in
        for index in writes { try! smallCache.set(body, forKey: key(index)) }
    }
    Benchmark("set 32 KiB: write to a temporary name, rename") { _ in
        for index in writes { rawWrite(body, to: rawPaths[index], temporary: rawPaths[index] + ".tmp") }
    }

    // MARK: 100,000 entries

    Benchmark(
        "open, 100,000 entries: DiskCache",
        configuration: .init(metrics: [.wallClock], warmupIterations: 1, maxIterations: 20)
    ) { _ in
        _ = largeCache
        blackHole(try! DiskCache(directory: large.url, configuration: .init(sizeLimit: 1 << 40)))
    }
    Benchmark("get 1 KB, 100,000 entries: DiskCache") { _ in
        for index in largeReads { blackHole(try! largeCache.data(forKey: key(index))) }
    }
    Benchmark("get 1 KB, 1,000 entries: DiskCache") { _ in
        for index in mediumReads { blackHole(try! mediumCache.data(forKey: key(index))) }
    }
    Benchmark("set 1 KB, 100,000 entries: DiskCache") { _ in
        for index in largeReads { try! largeCache.set(smallBody, forKey: key(index)) }
    }
    Benchmark("set 1 KB, 1,000 entries: DiskCache") { _ in
        for index in mediumReads { try! mediumCache.set(smallBody, forKey: key(index)) }
    }

    // MARK: Peers, 1,000 entries of 32 KiB

    Benchmark(
        "get 32 KiB, 1,000 entries: URLCache",
        configuration: .init(metrics: [.wallClock], warmupIterations: 1, maxDuration: .seconds(5), maxIterations: 5)
    ) { _ in
        for index in reads { blackHole(urlCache.cachedResponse(for: requests[index])) }
    }

    Benchmark(
        "set 32 KiB, 1,000 entries: naive cache",
        configuration: .init(metrics: [.wallClock], warmupIterations: 1, maxDuration: .seconds(5), maxIterations: 5)
    ) { _ in
        for index in writes { try! naive.set(body, forKey: key(index)) }
    }
    Benchmark("get 32 KiB, 1,000 entries: naive cache") { _ in
        for index in reads { blackHole(naive.data(forKey: key(index))) }
    }
}
