import Cachalot
import CachalotAsyncHTTPClient
import CachalotPostgres
import CachalotTestOrigin
import Foundation
import PostgresNIO

/// How much the benchmark does.
enum Plan {
    static let valueSize = 32 << 10
    /// About what a stored response head takes.
    static let metadataSize = 300
    /// Keys read by the hits, in turn.
    static let hitKeys = 256
    static let hitsPerRound = 1_000
    static let setsPerRound = 200
    /// Keys written in turn by the sets of keys already there.
    static let overwrittenKeys = 64
    /// Calls of one side before the other side's, alternating which goes first.
    static let block = 50
    static let warmUpCalls = 100
    static let loaderURLs = 500
    static let loaderPassesPerRound = 2
}


var random = SystemRandomNumberGenerator()
func randomBytes(_ count: Int) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
}
// Random bytes, as compressed images are: PostgreSQL's TOAST compression gains nothing on them.
let value = Data(randomBytes(Plan.valueSize))
let metadata = Data(randomBytes(Plan.metadataSize))
let valueBuffer = ByteBuffer(data: value)
let metadataBuffer = ByteBuffer(data: metadata)

let logged = try Database(port: port, name: arguments[2], isUnlogged: false)
let unlogged = try Database(port: port, name: arguments[3], isUnlogged: true)


try await running([logged, unlogged]) {
    for database in [logged, unlogged] { try await database.prepare() }
    print("Server: \(try await logged.settings()).\n")

    // MARK: Hits

    let hitKeys = (0..<Plan.hitKeys).map { "https://images.example.com/hits/\($0).jpg?w=256" }
    for key in hitKeys { try await logged.cache.set(value, forKey: key, metadata: metadata) }
    // The baseline looks rows up by digest, as the shared tier does; it is given them ready.
    var hitDigests: [ByteBuffer] = []
    for key in hitKeys {
        let rows = try await logged.client.query(
            "SELECT digest FROM cachalot_entries WHERE key = \(ByteBuffer(string: key))"
        )
        for try await digest in rows.decode(ByteBuffer.self) { hitDigests.append(digest) }
    }
    guard hitDigests.count == hitKeys.count else {
        throw BenchmarkFailure("found \(hitDigests.count) of the \(hitKeys.count) rows written")
    }

    func hit(_ call: Int) async throws {
        guard let entry = try await logged.cache.entry(forKey: hitKeys[call % hitKeys.count]),
            entry.data.count == Plan.valueSize
        else { throw BenchmarkFailure("the shared tier missed") }
    }
    func bareSelect(_ call: Int) async throws {
        let rows = try await logged.client.query(
            "SELECT value, metadata FROM cachalot_entries WHERE digest = \(hitDigests[call % hitDigests.count])"
        )
        var found = 0
        for try await (value, _) in rows.decode((Data, Data).self) { found = value.count }
        guard found == Plan.valueSize else { throw BenchmarkFailure("the SELECT found no row") }
    }

    // MARK: Sets

    /// The arguments of one baseline write: a digest as random as SHA-256's, and the key.
    struct PlainRow {
        let digest: ByteBuffer
        let key: ByteBuffer
    }
    func plainRows(_ keys: [String]) -> [PlainRow] {
        keys.map { PlainRow(digest: ByteBuffer(bytes: randomBytes(32)), key: ByteBuffer(string: $0)) }
    }
    var plainID: Int64 = 0
    let checksum = Int64.random(in: 0...Int64(UInt32.max))
    func bareUpsert(_ row: PlainRow, into database: Database) async throws {
        plainID += 1
        let size = Int64(row.key.readableBytes + valueBuffer.readableBytes + metadataBuffer.readableBytes)
        let created = Date().timeIntervalSince1970
        _ = try await database.client.query(
            """
            INSERT INTO plain_entries (digest, id, key, value, metadata, size, checksum, created)
            VALUES (\(row.digest), \(plainID), \(row.key), \(valueBuffer), \(metadataBuffer), \(size), \(checksum),
                \(created))
            ON CONFLICT (digest) DO UPDATE SET
                id = excluded.id, key = excluded.key, value = excluded.value, metadata = excluded.metadata,
                size = excluded.size, checksum = excluded.checksum, created = excluded.created
            """
        ).collect()
    }

    let overwrittenKeys = (0..<Plan.overwrittenKeys).map { "https://images.example.com/overwritten/\($0).jpg" }
    let overwrittenRows = [logged.name: plainRows(overwrittenKeys), unlogged.name: plainRows(overwrittenKeys)]

    /// Sets of new keys (`isNew`) or of keys already there, through the shared tier and bare.
    func sets(_ database: Database, isNew: Bool, count: Int, label: String) async throws -> RoundResult {
        let keys =
            isNew
            ? (0..<count).map { "https://images.example.com/new/\(label)/\($0).jpg" }
            : (0..<count).map { overwrittenKeys[$0 % overwrittenKeys.count] }
        let rows = isNew ? plainRows(keys) : (0..<count).map { overwrittenRows[database.name]![$0 % overwrittenKeys.count] }
        return await interleaved(count: count, block: Plan.block) { call in
            try await database.cache.set(value, forKey: keys[call], metadata: metadata)
        } baseline: { call in
            try await bareUpsert(rows[call], into: database)
        }
    }

    // MARK: Loader

    let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=3600")], data: value) }
    defer { origin.stop() }
    let transport = AsyncHTTPClientTransport()
    let urls = (0..<Plan.loaderURLs).map { origin.url("/loader/\($0).jpg") }
    let scratch = FileManager.default.temporaryDirectory.appending(path: "shared-tier-timer-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(at: scratch) }
    let noMemory = ResourceLoader.Configuration(memoryCostLimit: 0)

    // The shared tier is filled from the origin by a loader with no tier of its own.
    let filler = try ResourceLoader(configuration: noMemory, transport: transport, shared: [logged.cache])
    for url in urls { _ = try await filler.load(url) }
    await filler.waitForBackgroundWork()
    // The warm loader's first pass fills its disk from the shared tier.
    let warmLoader = try ResourceLoader(
        configuration: noMemory,
        transport: transport,
        disk: DiskCache(directory: scratch.appending(path: "warm")),
        shared: [logged.cache]
    )
    for url in urls { _ = try await warmLoader.load(url) }
    await warmLoader.waitForBackgroundWork()
    let originRequests = origin.requests.count

    /// Loads every URL through `loader`, one at a time, checking that each came from `source`,
    /// and waits for the loader's background work (the writes of promotions) before it ends.
    func pass(_ loader: ResourceLoader, expecting source: Resource.Source) async throws {
        for url in urls {
            let resource = try await loader.load(url)
            guard resource.source == source, resource.body.count == Plan.valueSize else {
                throw BenchmarkFailure("a load came from \(resource.source), not \(source)")
            }
        }
        await loader.waitForBackgroundWork()
    }
    var coldDisks = 0
    /// A pass of a loader with a new, empty disk tier: each load is a shared-tier hit, promoted
    /// to that disk. Making the loader and deleting its directory are not timed.
    func coldPasses(_ passes: Int) async throws -> RoundResult {
        var loaders: [(ResourceLoader, URL)] = []
        for _ in 0..<passes {
            coldDisks += 1
            let directory = scratch.appending(path: "cold-\(coldDisks)")
            let loader = try ResourceLoader(
                configuration: noMemory,
                transport: transport,
                disk: DiskCache(directory: directory),
                shared: [logged.cache]
            )
            loaders.append((loader, directory))
        }
        let result = await interleaved(count: passes, block: 1) { pass in
            try await coldPass(loaders[pass].0)
        } baseline: { _ in
            try await warmPass()
        }
        for (_, directory) in loaders { try FileManager.default.removeItem(at: directory) }
        return result
    }
    func coldPass(_ loader: ResourceLoader) async throws { try await pass(loader, expecting: .shared) }
    func warmPass() async throws { try await pass(warmLoader, expecting: .disk) }

    // MARK: Rounds

    var hits = Comparison(
        title: "Hit of 32 KiB",
        subjectName: "PostgresCache",
        baselineName: "bare SELECT",
        goal: 1.3
    )
    var setComparisons: [(database: Database, isNew: Bool, comparison: Comparison)] = []
    for database in [logged, unlogged] {
        for isNew in [true, false] {
            let tables = database.isUnlogged ? "UNLOGGED tables" : "logged tables"
            let comparison = Comparison(
                title: "Set of 32 KiB, \(isNew ? "new key" : "key already there"), \(tables)",
                subjectName: "PostgresCache",
                baselineName: "bare upsert",
                goal: 1.5
            )
            setComparisons.append((database, isNew, comparison))
        }
    }
    var loader = Comparison(
        title: "Loader, \(Plan.loaderURLs) URLs of 32 KiB, memory tier off: cold disk served by the shared tier "
            + "against its own warm disk",
        subjectName: "cold disk, shared tier",
        baselineName: "warm disk",
        goal: nil
    )

    // Warm-up: every path once, untimed.
    _ = await interleaved(count: Plan.warmUpCalls, block: Plan.block, subject: hit, baseline: bareSelect)
    for (database, isNew, _) in setComparisons {
        _ = try await sets(database, isNew: isNew, count: Plan.warmUpCalls, label: "warm-up")
    }
    _ = try await coldPasses(1)

    for round in 1...rounds {
        hits.rounds.append(
            await interleaved(count: Plan.hitsPerRound, block: Plan.block, subject: hit, baseline: bareSelect)
        )
        for index in setComparisons.indices {
            let (database, isNew, _) = setComparisons[index]
            let result = try await sets(database, isNew: isNew, count: Plan.setsPerRound, label: "round-\(round)")
            setComparisons[index].comparison.rounds.append(result)
        }
        loader.rounds.append(try await coldPasses(Plan.loaderPassesPerRound))
        FileHandle.standardError.write(Data("round \(round) of \(rounds) done\n".utf8))
    }

    print(
        "Sequential calls (one at a time); \(rounds) rounds, each side \(Plan.hitsPerRound) hits and "
            + "\(Plan.setsPerRound) sets of each kind per round, in alternating blocks of \(Plan.block), after "
            + "\(Plan.warmUpCalls) untimed; values of \(Plan.valueSize) random bytes with \(Plan.metadataSize) bytes "
            + "of metadata. The shared tier keeps 1 GiB per database, which these writes never reach (no trim "
            + "by size). Ratios are the shared tier's median over the baseline's.\n"
    )
    hits.printCallTable()
    for (_, _, comparison) in setComparisons { comparison.printCallTable() }
    loader.printPassTable(loads: Plan.loaderURLs)
    let stray = origin.requests.count - originRequests
    print("Loads that reached the origin during the loader's rounds: \(stray).\n")
    printSummary([hits] + setComparisons.map(\.comparison) + [loader])
}
