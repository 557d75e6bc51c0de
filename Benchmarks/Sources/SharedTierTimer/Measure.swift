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
    static let hitsPerRound = 2_000
    static let setsPerRound = 300
    /// Keys written in turn by the sets of keys already there.
    static let overwrittenKeys = 64
    /// Calls of one side before the other side's, alternating which goes first.
    static let block = 10
    static let warmUpCalls = 100
    static let loaderURLs = 500
    static let loaderPassesPerRound = 2
    /// The sizes of the large rows measured, and the calls each way per round.
    static let largeValueSizes = [1 << 20, 8 << 20, 32 << 20]
    static let largeCallsPerRound = 8
}

/// The bytes every measurement stores: random, as compressed images are (PostgreSQL's TOAST
/// compression gains nothing on them), and as the byte buffers the baselines bind.
struct Payload {
    let value: Data
    let metadata: Data
    let valueBuffer: ByteBuffer
    let metadataBuffer: ByteBuffer

    init(valueSize: Int = Plan.valueSize) {
        self.value = Data(randomBytes(valueSize))
        self.metadata = Data(randomBytes(Plan.metadataSize))
        self.valueBuffer = ByteBuffer(data: self.value)
        self.metadataBuffer = ByteBuffer(data: self.metadata)
    }
}

func randomBytes(_ count: Int) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: 0...255) }
}

/// Hits of `keys` keys in turn, through the shared tier and bare.
struct Hits {
    let database: Database
    let keys: [String]
    /// The rows' digests, which the baseline is given ready.
    let digests: [ByteBuffer]
    /// The bytes of each value.
    let size: Int

    /// Writes the keys through the shared tier and reads their digests back.
    init(database: Database, payload: Payload, keys: Int = Plan.hitKeys) async throws {
        self.database = database
        self.size = payload.value.count
        self.keys = (0..<keys).map { "https://images.example.com/hits/\(payload.value.count)/\($0).jpg?w=256" }
        var digests: [ByteBuffer] = []
        for key in self.keys {
            try await database.cache.set(payload.value, forKey: key, metadata: payload.metadata)
            let rows = try await database.client.query(
                "SELECT digest FROM cachalot_entries WHERE key = \(ByteBuffer(string: key))"
            )
            for try await digest in rows.decode(ByteBuffer.self) { digests.append(digest) }
        }
        guard digests.count == self.keys.count else {
            throw BenchmarkFailure("found \(digests.count) of the \(self.keys.count) rows written")
        }
        self.digests = digests
    }

    func round(count: Int, block: Int = Plan.block) async throws -> RoundResult {
        try await interleaved(count: count, block: block) { call in
            guard let entry = try await self.database.cache.entry(forKey: self.keys[call % self.keys.count]),
                entry.data.count == self.size
            else { throw BenchmarkFailure("the shared tier missed") }
        } baseline: { call in
            let rows = try await self.database.client.query(
                "SELECT value, metadata FROM cachalot_entries WHERE digest = \(self.digests[call % self.digests.count])"
            )
            var found = 0
            for try await (value, _) in rows.decode((Data, Data).self) { found = value.count }
            guard found == self.size else { throw BenchmarkFailure("the SELECT found no row") }
        }
    }
}

/// Sets through the shared tier, against an upsert of the same columns into `plain_entries`.
struct Sets {
    let database: Database
    let payload: Payload
    /// Whether each set writes a key not written before; if not, `Plan.overwrittenKeys` keys in turn.
    let isNew: Bool
    private let overwritten: [(key: String, digest: ByteBuffer)]

    init(database: Database, payload: Payload, isNew: Bool, overwrittenKeys: Int = Plan.overwrittenKeys) {
        self.database = database
        self.payload = payload
        self.isNew = isNew
        self.overwritten = (0..<overwrittenKeys).map {
            ("https://images.example.com/overwritten/\($0).jpg", ByteBuffer(bytes: randomBytes(32)))
        }
    }

    /// `count` sets each way; `label` makes the new keys of this round its own. Counts the WAL
    /// each side's blocks write.
    func round(count: Int, label: String, block: Int = Plan.block) async throws -> RoundResult {
        // The baseline's digests are as random as SHA-256's, made before the clock starts.
        let rows: [(key: String, digest: ByteBuffer)] =
            self.isNew
            ? (0..<count).map {
                ("https://images.example.com/new/\(label)/\($0).jpg", ByteBuffer(bytes: randomBytes(32)))
            }
            : (0..<count).map { self.overwritten[$0 % self.overwritten.count] }
        let keys = rows.map { ByteBuffer(string: $0.key) }
        let checksum = Int64.random(in: 0...Int64(UInt32.max))
        return try await interleaved(count: count, block: block, counter: self.database.walPosition) {
            call in
            try await self.database.cache.set(
                self.payload.value,
                forKey: rows[call].key,
                metadata: self.payload.metadata
            )
        } baseline: { call in
            try await self.upsert(digest: rows[call].digest, id: Int64(call), key: keys[call], checksum: checksum)
        }
    }

    private func upsert(digest: ByteBuffer, id: Int64, key: ByteBuffer, checksum: Int64) async throws {
        let (value, metadata) = (self.payload.valueBuffer, self.payload.metadataBuffer)
        let size = Int64(key.readableBytes + value.readableBytes + metadata.readableBytes)
        let created = Date().timeIntervalSince1970
        _ = try await self.database.client.query(
            """
            INSERT INTO plain_entries (digest, id, key, value, metadata, size, checksum, created)
            VALUES (\(digest), \(id), \(key), \(value), \(metadata), \(size), \(checksum), \(created))
            ON CONFLICT (digest) DO UPDATE SET
                id = excluded.id, key = excluded.key, value = excluded.value, metadata = excluded.metadata,
                size = excluded.size, checksum = excluded.checksum, created = excluded.created
            """
        ).collect()
    }
}

/// A loader with no memory tier, in three states: with a new, empty disk, so that each load is
/// a shared-tier hit, promoted to that disk; with no disk tier, so that each load is a
/// shared-tier hit promoted nowhere; and with its own warm disk, which answers each load.
final class Loads {
    let urls: [URL]
    private let origin: TestOrigin
    private let transport: AsyncHTTPClientTransport
    private let shared: PostgresCache
    private let scratch: URL
    private let warmLoader: ResourceLoader
    private let diskless: ResourceLoader
    private var coldDisks = 0
    /// The origin's requests once the tiers were filled.
    private let filledAfter: Int

    /// Starts the origin, fills the shared tier from it with a loader that has no tier of its
    /// own, then the warm loader's disk from the shared tier.
    init(shared: PostgresCache, payload: Payload) async throws {
        let body = payload.value
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=3600")], data: body) }
        let urls = (0..<Plan.loaderURLs).map { origin.url("/loader/\($0).jpg") }
        let transport = AsyncHTTPClientTransport()
        let scratch = FileManager.default.temporaryDirectory.appending(path: "shared-tier-timer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: false)
        let filler = try ResourceLoader(configuration: Self.noMemory, transport: transport, shared: [shared])
        for url in urls { _ = try await filler.load(url) }
        await filler.waitForBackgroundWork()
        self.origin = origin
        self.urls = urls
        self.transport = transport
        self.shared = shared
        self.scratch = scratch
        self.warmLoader = try ResourceLoader(
            configuration: Self.noMemory,
            transport: transport,
            disk: DiskCache(directory: scratch.appending(path: "warm")),
            shared: [shared]
        )
        self.diskless = try ResourceLoader(configuration: Self.noMemory, transport: transport, shared: [shared])
        self.filledAfter = origin.requests.count
        try await Self.pass(self.warmLoader, urls, expecting: .shared)
    }

    private static let noMemory = ResourceLoader.Configuration(memoryCostLimit: 0)

    /// Requests that reached the origin since the tiers were filled: none, if every timed load
    /// came from a tier.
    var originRequestsSinceFilled: Int { self.origin.requests.count - self.filledAfter }

    /// `passes` passes over every URL by a loader with a cold disk against the warm one, then by
    /// the loader with no disk against the warm one. Making the cold loaders and deleting their
    /// directories are not timed.
    func round(passes: Int) async throws -> (coldDisk: RoundResult, noDisk: RoundResult) {
        var cold: [(loader: ResourceLoader, directory: URL)] = []
        for _ in 0..<passes {
            self.coldDisks += 1
            let directory = self.scratch.appending(path: "cold-\(self.coldDisks)")
            let loader = try ResourceLoader(
                configuration: Self.noMemory,
                transport: self.transport,
                disk: DiskCache(directory: directory),
                shared: [self.shared]
            )
            cold.append((loader, directory))
        }
        let coldDisk = try await interleaved(count: passes, block: 1) { pass in
            try await Self.pass(cold[pass].loader, self.urls, expecting: .shared)
        } baseline: { _ in
            try await Self.pass(self.warmLoader, self.urls, expecting: .disk)
        }
        for (_, directory) in cold { try FileManager.default.removeItem(at: directory) }
        let noDisk = try await interleaved(count: passes, block: 1) { _ in
            try await Self.pass(self.diskless, self.urls, expecting: .shared)
        } baseline: { _ in
            try await Self.pass(self.warmLoader, self.urls, expecting: .disk)
        }
        return (coldDisk, noDisk)
    }

    /// Loads `urls` through `loader`, one at a time, checking that each came from `source`,
    /// and waits for the loader's background work (the promotions' writes) before it returns.
    private static func pass(_ loader: ResourceLoader, _ urls: [URL], expecting source: Resource.Source) async throws {
        for url in urls {
            let resource = try await loader.load(url)
            guard resource.source == source, resource.body.count == Plan.valueSize else {
                throw BenchmarkFailure("a load came from \(resource.source), not \(source)")
            }
        }
        await loader.waitForBackgroundWork()
    }

    /// Stops the origin and deletes the disks.
    func finish() {
        self.origin.stop()
        try? FileManager.default.removeItem(at: self.scratch)
    }
}

/// Runs every measurement for `rounds` rounds on the two databases and prints the tables.
func measure(port: Int, loggedDatabase: String, unloggedDatabase: String, rounds: Int) async throws {
    let payload = Payload()
    let logged = try Database(port: port, name: loggedDatabase, isUnlogged: false)
    let unlogged = try Database(port: port, name: unloggedDatabase, isUnlogged: true)
    try await running([logged, unlogged]) {
        for database in [logged, unlogged] { try await database.prepare() }
        let settings = try await logged.settings()

        let hits = try await Hits(database: logged, payload: payload)
        var hitComparison = Comparison(
            title: "Hit of 32 KiB",
            subjectName: "PostgresCache",
            baselineName: "bare SELECT",
            goal: 1.3
        )
        var sets: [(Sets, Comparison)] = []
        for database in [logged, unlogged] {
            for isNew in [true, false] {
                let tables = database.isUnlogged ? "UNLOGGED tables" : "logged tables"
                let comparison = Comparison(
                    title: "Set of 32 KiB, \(isNew ? "new key" : "key already there"), \(tables)",
                    subjectName: "PostgresCache",
                    baselineName: "bare upsert",
                    goal: 1.5,
                    countedName: "WAL bytes/call"
                )
                sets.append((Sets(database: database, payload: payload, isNew: isNew), comparison))
            }
        }
        let loads = try await Loads(shared: logged.cache, payload: payload)
        defer { loads.finish() }
        var coldDiskComparison = Comparison(
            title: "Loader, memory tier off: a cold disk served by the shared tier against its own warm disk",
            subjectName: "cold disk, shared tier",
            baselineName: "warm disk",
            goal: nil
        )
        var noDiskComparison = Comparison(
            title: "Loader, memory tier off: no disk tier, served by the shared tier, against the warm disk",
            subjectName: "no disk, shared tier",
            baselineName: "warm disk",
            goal: nil
        )

        // Every path, untimed.
        _ = try await hits.round(count: Plan.warmUpCalls)
        for (set, _) in sets { _ = try await set.round(count: Plan.warmUpCalls, label: "warm-up") }
        _ = try await loads.round(passes: 1)

        for round in 1...rounds {
            hitComparison.rounds.append(try await hits.round(count: Plan.hitsPerRound))
            for index in sets.indices {
                let result = try await sets[index].0.round(count: Plan.setsPerRound, label: "\(round)")
                sets[index].1.rounds.append(result)
            }
            let (coldDisk, noDisk) = try await loads.round(passes: Plan.loaderPassesPerRound)
            coldDiskComparison.rounds.append(coldDisk)
            noDiskComparison.rounds.append(noDisk)
            FileHandle.standardError.write(Data("round \(round) of \(rounds) done\n".utf8))
        }

        print("Server: \(settings).\n")
        print(
            "Sequential calls, one at a time, from one process; \(rounds) rounds. Each round, each side: "
                + "\(Plan.hitsPerRound) hits, \(Plan.setsPerRound) sets of each kind, in alternating blocks of "
                + "\(Plan.block) calls, after \(Plan.warmUpCalls) untimed; values of \(Plan.valueSize) random bytes "
                + "with \(Plan.metadataSize) bytes of metadata; \(Plan.hitKeys) keys read in turn, "
                + "\(Plan.overwrittenKeys) overwritten in turn. The shared tier keeps up to 1 GiB per database, "
                + "which these writes do not reach (no trim by size), and trims by age every 64 writes, which "
                + "remove nothing here. Ratios are the shared tier's time over the baseline's: of the medians, and "
                + "of the means (calls/s, which count the slow calls the medians leave out). WAL bytes/call: what "
                + "the server's WAL position moved by while that side ran, over its calls.\n"
        )
        hitComparison.printCallTable()
        for (_, comparison) in sets { comparison.printCallTable() }
        print(
            "Loader: \(Plan.loaderURLs) URLs of 32 KiB from a loopback TestOrigin (`Cache-Control: max-age=3600`), "
                + "loaded one at a time, \(Plan.loaderPassesPerRound) passes each way per round in alternating "
                + "order; each cold pass has a new, empty disk (each load a shared-tier hit, written to that disk "
                + "before the load returns, since with no memory tier the promotion is not left to the "
                + "background); the loader with no disk tier promotes to nothing. Loads per second at each side's "
                + "median pass; the ratio is of pass times.\n"
        )
        coldDiskComparison.printPassTable(loads: Plan.loaderURLs)
        noDiskComparison.printPassTable(loads: Plan.loaderURLs)
        print("Requests that reached the origin during the timed passes: \(loads.originRequestsSinceFilled).\n")
        printSummary([hitComparison] + sets.map(\.1) + [coldDiskComparison, noDiskComparison])

        try await ladders(logged: logged, unlogged: unlogged, payload: payload, rounds: rounds)

        // Large rows, which a loader writes once they are whole on disk: how long a set and a
        // hit take at each size, against the same statements bare.
        var large: [Comparison] = []
        for size in Plan.largeValueSizes {
            let payload = Payload(valueSize: size)
            let set = Sets(database: logged, payload: payload, isNew: false, overwrittenKeys: 2)
            let hit = try await Hits(database: logged, payload: payload, keys: 1)
            var setComparison = Comparison(
                title: "Set of \(size >> 20) MiB, key already there, logged tables",
                subjectName: "PostgresCache",
                baselineName: "bare upsert",
                goal: nil
            )
            var hitComparison = Comparison(
                title: "Hit of \(size >> 20) MiB",
                subjectName: "PostgresCache",
                baselineName: "bare SELECT",
                goal: nil
            )
            _ = try await set.round(count: 2, label: "warm-up", block: 1)
            _ = try await hit.round(count: 2, block: 2)
            for round in 1...rounds {
                setComparison.rounds.append(
                    try await set.round(count: Plan.largeCallsPerRound, label: "\(round)", block: 2)
                )
                hitComparison.rounds.append(try await hit.round(count: Plan.largeCallsPerRound, block: 2))
            }
            large += [setComparison, hitComparison]
            FileHandle.standardError.write(Data("rows of \(size >> 20) MiB done\n".utf8))
        }
        print(
            "Large rows: values of 1, 8 and 32 MiB of random bytes, \(Plan.largeCallsPerRound) calls each way per "
                + "round in alternating blocks of 2, 2 keys overwritten in turn, logged tables.\n"
        )
        for comparison in large { comparison.printCallTable() }
    }
}

/// Where a set's time goes (``SetLadder``) in each database, alone.
func measureSets(port: Int, loggedDatabase: String, unloggedDatabase: String, rounds: Int) async throws {
    let logged = try Database(port: port, name: loggedDatabase, isUnlogged: false)
    let unlogged = try Database(port: port, name: unloggedDatabase, isUnlogged: true)
    try await running([logged, unlogged]) {
        for database in [logged, unlogged] { try await database.prepare() }
        try await ladders(logged: logged, unlogged: unlogged, payload: Payload(), rounds: rounds)
    }
}

/// Measures and prints ``SetLadder`` in each database.
func ladders(logged: Database, unlogged: Database, payload: Payload, rounds: Int) async throws {
    for database in [unlogged, logged] {
        let ladder = SetLadder(database: database, payload: payload)
        try await ladder.prepare()
        _ = try await ladder.round(count: Plan.warmUpCalls, label: "warm-up")
        var ladderRounds: [[Sample]] = []
        for round in 1...rounds {
            ladderRounds.append(try await ladder.round(count: Plan.setsPerRound, label: "\(round)"))
        }
        let tables = database.isUnlogged ? "UNLOGGED tables" : "logged tables"
        SetLadder.print(ladderRounds, title: "Where a set of a new key of 32 KiB goes, \(tables)")
    }
}
