import Benchmark
import Cachalot
import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The loader against what it is built on, timed in one iteration in alternating order (see
// the disk benchmarks): a memory hit against a MemoryCache get, a fresh disk hit against a
// DiskCache get of the same entry, and a miss against the same request sent with the transport.
// Hits are timed over 100 calls, network loads over 10.

let body = Data((0..<(32 << 10)).map { UInt8(truncatingIfNeeded: $0) })

/// What every benchmark here needs, made once by the first setup.
struct Fixtures: Sendable {
    let origin: TestOrigin
    let directory: TemporaryDirectory
    let memoryLoader: ResourceLoader
    let memoryBaseline: MemoryCache<String, Data>
    let diskLoader: ResourceLoader
    let disk: DiskCache
    let missLoader: ResourceLoader
    /// Misses stored in memory only: no disk write after each answer.
    let memoryMissLoader: ResourceLoader
    let transport: AsyncHTTPClientTransport
    /// Where the baseline of the plain-file row writes its files (``writeReplacing(_:named:in:)``).
    let plainWrites: URL
    /// Requests for 100 URLs on the origin, and their keys.
    let requests: [HTTPRequest]
    let keys: [String]

    static func make() async throws -> Fixtures {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=3600")], data: body) }
        let directory = try TemporaryDirectory()
        let transport = AsyncHTTPClientTransport()
        let requests = (0..<100).map { HTTPRequest(method: .get, url: origin.url("/images/\($0).jpg?w=256")) }
        let keys = requests.map { CacheKey.url(of: $0)! }
        let memoryLoader = try ResourceLoader(transport: transport)
        let memoryBaseline = try MemoryCache<String, Data>()
        let disk = try DiskCache(directory: directory.url.appending(path: "hits"))
        let diskLoader = try ResourceLoader(configuration: .init(memoryCostLimit: 0), transport: transport, disk: disk)
        for (request, key) in zip(requests, keys) {
            _ = try await memoryLoader.load(request)
            _ = try await diskLoader.load(request)
            try memoryBaseline.set(body, forKey: key, cost: body.count)
        }
        let missLoader = try ResourceLoader(
            configuration: .init(policy: .reloadIgnoringCacheData),
            transport: transport,
            disk: DiskCache(directory: directory.url.appending(path: "misses"))
        )
        let memoryMissLoader = try ResourceLoader(
            configuration: .init(policy: .reloadIgnoringCacheData),
            transport: transport
        )
        let plainWrites = directory.url.appending(path: "plain")
        try FileManager.default.createDirectory(at: plainWrites, withIntermediateDirectories: false)
        return Fixtures(
            origin: origin,
            directory: directory,
            memoryLoader: memoryLoader,
            memoryBaseline: memoryBaseline,
            diskLoader: diskLoader,
            disk: disk,
            missLoader: missLoader,
            memoryMissLoader: memoryMissLoader,
            transport: transport,
            plainWrites: plainWrites,
            requests: requests,
            keys: keys
        )
    }
}

nonisolated(unsafe) var fixtures: Fixtures?

func setUp() async throws {
    if fixtures == nil { fixtures = try await Fixtures.make() }
}

/// Times `subject` and `baseline` one after the other, the subject first in odd iterations, and
/// returns the ratio of their times × 1,000.
func timedInAlternatingOrder(
    _ iteration: Int,
    _ subject: () async throws -> Void,
    baseline: () async throws -> Void
) async throws -> Int {
    let clock = ContinuousClock()
    return try await timedInAlternatingOrder(iteration) {
        try await clock.measure(subject)
    } timingBaseline: {
        try await clock.measure(baseline)
    }
}

/// The same, with `subject` and `baseline` timing themselves.
func timedInAlternatingOrder(
    _ iteration: Int,
    timing subject: () async throws -> Duration,
    timingBaseline baseline: () async throws -> Duration
) async throws -> Int {
    var subjectTime = Duration.zero
    var baselineTime = Duration.zero
    if iteration.isMultiple(of: 2) {
        baselineTime = try await baseline()
        subjectTime = try await subject()
    } else {
        subjectTime = try await subject()
        baselineTime = try await baseline()
    }
    return Int((subjectTime / baselineTime * 1_000).rounded())
}

/// The time of each load of `requests`, one at a time, summed; between two loads, untimed,
/// `settle` lets the work a load leaves behind (a disk write) finish.
func timedOneByOne(
    _ requests: ArraySlice<HTTPRequest>,
    settle: () async -> Void = {},
    _ load: (HTTPRequest) async throws -> Void
) async throws -> Duration {
    let clock = ContinuousClock()
    var total = Duration.zero
    for request in requests {
        total += try await clock.measure { try await load(request) }
        await settle()
    }
    return total
}

/// Ten misses through `loader`, each load's background work (its disk write) settled, untimed,
/// before the next, against the same requests through the transport alone, in alternating order.
/// With `idle`, both sides wait that long, untimed, after each load as well, so that what a
/// load leaves running (in the kernel or the threads) has time to end before the next. With
/// `baselineWrites`, the baseline too writes each answer's body to a file there after it, untimed
/// (see ``writeReplacing(_:named:in:)``): what the machine makes a load pay for the file written
/// after the one before, with none of the disk tier's own work.
func settledMisses(
    through loader: ResourceLoader,
    _ fixtures: Fixtures,
    _ iteration: Int,
    idle: Duration? = nil,
    baselineWrites: URL? = nil
) async throws -> Int {
    let requests = fixtures.requests.prefix(10)
    let pause: () async -> Void = { if let idle { try? await Task.sleep(for: idle) } }
    return try await timedInAlternatingOrder(iteration) {
        try await timedOneByOne(
            requests,
            settle: {
                await loader.waitForBackgroundWork()
                await pause()
            }
        ) {
            blackHole(try await loader.load($0))
        }
    } timingBaseline: {
        var written: Data?
        var count = 0
        return try await timedOneByOne(
            requests,
            settle: {
                if let directory = baselineWrites, let body = written {
                    writeReplacing(body, named: "\(count)", in: directory)
                    count += 1
                }
                await pause()
            }
        ) {
            written = try await readAll(fixtures.transport.send($0, body: nil))
            blackHole(written)
        }
    }
}

/// Writes `body` to a new file in `directory` and renames it over `name`, as the disk tier
/// replaces an entry (no `fsync`, as the disk tier's default): the file system's work for a
/// stored response, the create, the write, the rename and the old file's removal, with nothing
/// of the cache's. Traps if the file system fails it: a benchmark's fixture, on its own
/// temporary directory.
func writeReplacing(_ body: Data, named name: String, in directory: URL) {
    let path = directory.appending(path: name).path
    let temporary = path + ".tmp"
    let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    precondition(descriptor >= 0, "open \(temporary): errno \(errno)")
    let written = body.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    precondition(written == body.count && close(descriptor) == 0, "write \(temporary): errno \(errno)")
    precondition(rename(temporary, path) == 0, "rename \(temporary): errno \(errno)")
}

/// Reads a transport's answer whole, as the loader does.
func readAll(_ reply: HTTPTransportResponse) async throws -> Data {
    var data = Data()
    for try await piece in reply.body { data.append(piece) }
    return data
}

let benchmarks: @Sendable () -> Void = {
    let ratio = BenchmarkMetric.custom("ratio × 1000", polarity: .prefersSmaller, useScalingFactor: false)
    let ratioConfiguration = Benchmark.Configuration(
        metrics: [ratio],
        warmupIterations: 3,
        maxDuration: .seconds(5),
        setup: setUp
    )
    nonisolated(unsafe) var iteration = 0

    /// 100 memory hits through the loader against `baseline`'s 100 gets of the same entries.
    func memoryHits(_ name: String, baseline: @escaping @Sendable (Fixtures) -> Void) {
        Benchmark(name, configuration: ratioConfiguration) { benchmark in
            let fixtures = fixtures!
            iteration += 1
            let measured = try await timedInAlternatingOrder(iteration) {
                for request in fixtures.requests { blackHole(try await fixtures.memoryLoader.load(request)) }
            } baseline: {
                baseline(fixtures)
            }
            benchmark.measurement(ratio, measured)
        }
    }

    memoryHits("memory hit through the loader against a MemoryCache get, same iteration") { fixtures in
        for key in fixtures.keys { blackHole(fixtures.memoryBaseline.value(forKey: key)) }
    }
    // The same, against a get whose key is built from the request, as any cache keyed by URL
    // must build it: reported beside the goal row, which gives the get its key ready.
    memoryHits("memory hit through the loader against a MemoryCache get keyed from the request, same iteration") {
        fixtures in
        for request in fixtures.requests {
            blackHole(CacheKey.url(of: request).map { fixtures.memoryBaseline.value(forKey: $0) })
        }
    }

    Benchmark(
        "fresh disk hit through the loader against a DiskCache get, same iteration",
        configuration: ratioConfiguration
    ) {
        benchmark in
        let fixtures = fixtures!
        iteration += 1
        let measured = try await timedInAlternatingOrder(iteration) {
            for request in fixtures.requests { blackHole(try await fixtures.diskLoader.load(request)) }
        } baseline: {
            for key in fixtures.keys { blackHole(try fixtures.disk.entry(forKey: key)) }
        }
        benchmark.measurement(ratio, measured)
    }

    // The same, with the answer's head read: a disk hit decodes the stored header fields only
    // when its head is first read.
    Benchmark(
        "fresh disk hit with its head read through the loader against a DiskCache get, same iteration",
        configuration: ratioConfiguration
    ) {
        benchmark in
        let fixtures = fixtures!
        iteration += 1
        let measured = try await timedInAlternatingOrder(iteration) {
            for request in fixtures.requests { blackHole(try await fixtures.diskLoader.load(request).response) }
        } baseline: {
            for key in fixtures.keys { blackHole(try fixtures.disk.entry(forKey: key)) }
        }
        benchmark.measurement(ratio, measured)
    }

    Benchmark(
        "miss from the loopback origin against the transport alone, same iteration",
        configuration: ratioConfiguration
    ) {
        benchmark in
        let fixtures = fixtures!
        iteration += 1
        let measured = try await timedInAlternatingOrder(iteration) {
            for request in fixtures.requests.prefix(10) { blackHole(try await fixtures.missLoader.load(request)) }
        } baseline: {
            for request in fixtures.requests.prefix(10) {
                blackHole(try await readAll(fixtures.transport.send(request, body: nil)))
            }
        }
        benchmark.measurement(ratio, measured)
    }

    /// Ten settled misses through the loader `loader` picks (``settledMisses(through:_:_:idle:)``).
    func settledMissBenchmark(
        _ name: String,
        idle: Duration? = nil,
        through loader: @escaping @Sendable (Fixtures) -> ResourceLoader
    ) {
        Benchmark(name, configuration: ratioConfiguration) { benchmark in
            let fixtures = fixtures!
            iteration += 1
            benchmark.measurement(
                ratio,
                try await settledMisses(through: loader(fixtures), fixtures, iteration, idle: idle)
            )
        }
    }

    // A miss's answer alone: the disk write it leaves behind finishes, untimed, before the
    // next load, as it does in an app that is not loading without pause.
    settledMissBenchmark(
        "miss answered, its disk write settled before the next, against the transport alone, same iteration"
    ) { $0.missLoader }
    // The same with no disk tier: what is left of a miss's cost when nothing is written.
    settledMissBenchmark(
        "miss answered with no disk tier, settled before the next, against the transport alone, same iteration"
    ) { $0.memoryMissLoader }
    // The first against a baseline that writes each answer to a plain file after it, untimed:
    // what is left of the disk tier's share once the machine's own cost of a file written after
    // each answer is on both sides.
    Benchmark(
        "miss answered, its disk write settled before the next, against the transport with a plain file written after each, same iteration",
        configuration: ratioConfiguration
    ) { benchmark in
        let fixtures = fixtures!
        iteration += 1
        benchmark.measurement(
            ratio,
            try await settledMisses(
                through: fixtures.missLoader,
                fixtures,
                iteration,
                baselineWrites: fixtures.plainWrites
            )
        )
    }
    // The two above with 20 ms idle after each load, on both sides: how much of the disk tier's
    // share is the write's aftermath, felt by whatever load comes next (on 2026-11-28, little).
    settledMissBenchmark(
        "miss answered, its disk write settled and 20 ms idle before the next, against the transport alone, same iteration",
        idle: .milliseconds(20)
    ) { $0.missLoader }
    settledMissBenchmark(
        "miss answered with no disk tier, settled and 20 ms idle before the next, against the transport alone, same iteration",
        idle: .milliseconds(20)
    ) { $0.memoryMissLoader }

    // The same misses with no disk tier: what writing each response to disk after answering
    // costs the next loads on this machine's two cores.
    Benchmark(
        "miss stored in memory only against the transport alone, same iteration",
        configuration: ratioConfiguration
    ) {
        benchmark in
        let fixtures = fixtures!
        iteration += 1
        let measured = try await timedInAlternatingOrder(iteration) {
            for request in fixtures.requests.prefix(10) {
                blackHole(try await fixtures.memoryMissLoader.load(request))
            }
        } baseline: {
            for request in fixtures.requests.prefix(10) {
                blackHole(try await readAll(fixtures.transport.send(request, body: nil)))
            }
        }
        benchmark.measurement(ratio, measured)
    }

    // Beside them: times per 10 loads of a stored URL through the loader and through
    // URLSession with its URLCache, which on Linux never stores and so always asks the origin.

    let timeConfiguration = Benchmark.Configuration(
        metrics: [.wallClock],
        warmupIterations: 3,
        maxDuration: .seconds(3),
        setup: setUp
    )
    Benchmark("10 loads of a stored URL: ResourceLoader", configuration: timeConfiguration) { _ in
        let fixtures = fixtures!
        for request in fixtures.requests.prefix(10) { blackHole(try await fixtures.memoryLoader.load(request)) }
    }
    let session: URLSession = {
        let configuration = URLSessionConfiguration.default
        configuration.urlCache = URLCache(memoryCapacity: 16 << 20, diskCapacity: 256 << 20, diskPath: nil)
        return URLSession(configuration: configuration)
    }()
    Benchmark("10 loads of a stored URL: URLSession with URLCache", configuration: timeConfiguration) { _ in
        let fixtures = fixtures!
        for request in fixtures.requests.prefix(10) {
            blackHole(try await session.data(from: request.url!))
        }
    }
}
