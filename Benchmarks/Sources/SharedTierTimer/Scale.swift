import Cachalot
import CachalotPostgres
import Foundation
import HTTPTypes
import PostgresNIO

/// How much the scale benchmark does.
enum ScalePlan {
    /// The table sizes measured, in rows, in order: the table grows from one to the next.
    static let sizes = [10_000, 100_000, 1_000_000]
    static let valueSize = 4 << 10
    /// The groups the rows are spread over: each has a prefix and a tag of its own, so that at
    /// 1,000,000 rows a group is 1,000 rows.
    static let groups = 1_000
    static let hitsPerRound = 2_000
    static let urlPurgesPerRound = 20
    /// Prefix purges, and as many tag purges, each of a whole group.
    static let groupPurgesPerRound = 3
    static let setsPerRound = 1_280
    static let block = 10
}

/// The shared tier on one logged database as its table grows from 10,000 to 1,000,000 rows of
/// 4 KiB: hits against a bare `SELECT` of the same rows, purges by URL, prefix and tag, what
/// the trim costs a write, and the sizes of the table and its indexes.
///
/// **The rows.** Key `https://scale.example.com/G/N.jpg`, for group G of ``ScalePlan/groups``
/// and N from 0, a value of 4 KiB of random bytes, and the metadata of a stored `200` whose
/// `Surrogate-Key` is `group-G`. The first row of each group is written through
/// `PostgresCache.set`; the others are copies of it made by one `INSERT … SELECT` per 100
/// groups, with the key, its SHA-256 digest and the size the tier would write (the metadata
/// holds no URL, so the copies are what `set` would write). Every hit reads a copy through
/// `PostgresCache.entry(forKey:)`, which checks the key, the digest and the checksum: a copy
/// that differed would be a miss, counted in the hits' "failed" column.
struct ScaleBenchmark {
    let database: Database
    let rounds: Int
    private var generator = SystemRandomNumberGenerator()

    init(database: Database, rounds: Int) {
        self.database = database
        self.rounds = rounds
    }

    static func key(group: Int, number: Int) -> String {
        "https://scale.example.com/\(group)/\(number).jpg"
    }

    /// The metadata of a stored `200` tagged `tag`.
    static func metadata(tag: String) -> Data {
        var fields = HTTPFields()
        fields[.contentType] = "image/jpeg"
        fields[.cacheControl] = "public, max-age=86400"
        fields[HTTPField.Name("Surrogate-Key")!] = tag
        let now = Date()
        return StoredResponse(
            request: HTTPRequest(method: .get, scheme: "https", authority: "scale.example.com", path: "/"),
            response: HTTPResponse(status: .ok, headerFields: fields),
            requestTime: now,
            responseTime: now
        ).encoded()
    }

    /// Writes each group's first row through the shared tier and keeps a copy of it.
    func writeTemplates() async throws {
        let value = Data(randomBytes(ScalePlan.valueSize))
        for group in 0..<ScalePlan.groups {
            try await self.database.cache.set(
                value,
                forKey: Self.key(group: group, number: 0),
                metadata: Self.metadata(tag: "group-\(group)")
            )
        }
        // A utility statement takes no parameters: the count is written in.
        _ = try await self.database.client.query(
            PostgresQuery(
                unsafeSQL: """
                    CREATE TABLE scale_templates AS
                    SELECT g AS grp, e.value, e.metadata, e.checksum, e.created, e.tags, e.signature
                    FROM generate_series(0, \(ScalePlan.groups - 1)) AS g
                    JOIN cachalot_entries AS e
                        ON e.key = convert_to('https://scale.example.com/' || g || '/0.jpg', 'UTF8')
                    """
            )
        ).collect()
        let count = try await self.count("SELECT count(*) FROM scale_templates")
        guard count == ScalePlan.groups else {
            throw BenchmarkFailure("found \(count) of the \(ScalePlan.groups) rows written through the tier")
        }
    }

    /// Makes `groups` hold rows 0 to `perGroup - 1` each, adding the missing ones.
    func fill(groups: Range<Int>, perGroup: Int) async throws {
        var low = groups.lowerBound
        while low < groups.upperBound {
            let high = min(low + 100, groups.upperBound)
            _ = try await self.database.client.query(
                """
                INSERT INTO cachalot_entries (digest, key, value, metadata, size, checksum, created, tags, signature)
                SELECT sha256(k), k, t.value, t.metadata, length(k) + length(t.value) + length(t.metadata),
                    t.checksum, t.created, t.tags, t.signature
                FROM scale_templates AS t, generate_series(0, \(perGroup - 1)) AS n,
                    convert_to('https://scale.example.com/' || t.grp || '/' || n || '.jpg', 'UTF8') AS k
                WHERE t.grp >= \(low) AND t.grp < \(high)
                ON CONFLICT (digest) DO NOTHING
                """
            ).collect()
            low = high
        }
    }

    func count(_ query: PostgresQuery) async throws -> Int {
        for try await count in try await self.database.client.query(query).decode(Int.self) { return count }
        throw BenchmarkFailure("no count")
    }

    /// The digest of each of `keys`, as the table holds it.
    func digests(of keys: [String]) async throws -> [ByteBuffer] {
        var digests: [ByteBuffer] = []
        for key in keys {
            let rows = try await self.database.client.query(
                "SELECT digest FROM cachalot_entries WHERE digest = sha256(\(ByteBuffer(string: key)))"
            )
            for try await digest in rows.decode(ByteBuffer.self) { digests.append(digest) }
        }
        guard digests.count == keys.count else {
            throw BenchmarkFailure("found \(digests.count) of \(keys.count) rows to hit")
        }
        return digests
    }

    /// Random hits over the whole table, through the tier and bare, interleaved.
    mutating func hits(perGroup: Int) async throws -> RoundResult {
        var keys: [String] = []
        for _ in 0..<ScalePlan.hitsPerRound {
            keys.append(
                Self.key(
                    group: Int.random(in: 0..<ScalePlan.groups, using: &self.generator),
                    number: Int.random(in: 0..<perGroup, using: &self.generator)
                )
            )
        }
        let digests = try await self.digests(of: keys)
        let database = self.database
        return try await interleaved(count: keys.count, block: ScalePlan.block) { call in
            guard let entry = try await database.cache.entry(forKey: keys[call]),
                entry.data.count == ScalePlan.valueSize
            else { throw BenchmarkFailure("the shared tier missed \(keys[call])") }
        } baseline: { call in
            let rows = try await database.client.query(
                "SELECT value, metadata FROM cachalot_entries WHERE digest = \(digests[call])"
            )
            var found = 0
            for try await (value, _) in rows.decode((Data, Data).self) { found = value.count }
            guard found == ScalePlan.valueSize else { throw BenchmarkFailure("the SELECT found no row") }
        }
    }

    /// Times `removal`, which must remove `expected` rows.
    func purge(_ removal: CacheRemoval, expecting expected: Int, into sample: inout Sample) async throws {
        let database = self.database
        await sample.time {
            let removed = try await database.cache.removeValues(matching: removal)
            guard removed == expected else { throw BenchmarkFailure("\(removal) removed \(removed), not \(expected)") }
        }
    }

    /// URL, prefix and tag purges of rows picked at random, each group put back after.
    mutating func purges(perGroup: Int) async throws -> (url: Sample, prefix: Sample, tag: Sample) {
        var url = Sample()
        var prefix = Sample()
        var tag = Sample()
        var touched = Set<Int>()
        // Distinct keys: a key purged twice would remove nothing the second time.
        var keys = Set<String>()
        while keys.count < ScalePlan.urlPurgesPerRound {
            let group = Int.random(in: 0..<ScalePlan.groups, using: &self.generator)
            let number = Int.random(in: 0..<perGroup, using: &self.generator)
            guard keys.insert(Self.key(group: group, number: number)).inserted else { continue }
            touched.insert(group)
        }
        for key in keys { try await self.purge(.url(key), expecting: 1, into: &url) }
        // Each group purge takes a group no other purge of the round touched.
        var groups = Array(0..<ScalePlan.groups).filter { !touched.contains($0) }
        groups.shuffle(using: &self.generator)
        for index in 0..<ScalePlan.groupPurgesPerRound {
            try await self.purge(
                .prefix("https://scale.example.com/\(groups[2 * index])/"),
                expecting: perGroup,
                into: &prefix
            )
            try await self.purge(.tag("group-\(groups[2 * index + 1])"), expecting: perGroup, into: &tag)
            touched.formUnion([groups[2 * index], groups[2 * index + 1]])
        }
        for group in touched { try await self.fill(groups: group..<(group + 1), perGroup: perGroup) }
        return (url, prefix, tag)
    }

    /// Sets of new 4 KiB keys through a tier whose table is at its size, so that it trims, in
    /// blocks alternating with sets through one far below its size (1 TiB), which trims only by
    /// age, every 64th write.
    func trims(
        full: PostgresCache,
        label: String,
        count: Int = ScalePlan.setsPerRound
    ) async throws -> (result: RoundResult, trimmed: Int) {
        let value = Data(randomBytes(ScalePlan.valueSize))
        let metadata = Self.metadata(tag: "new")
        let before = full.statistics.trimmed
        let database = self.database
        let result = try await interleaved(count: count, block: ScalePlan.block) { call in
            try await full.set(
                value,
                forKey: "https://scale.example.com/new/\(label)/full/\(call).jpg",
                metadata: metadata
            )
        } baseline: { call in
            try await database.cache.set(
                value,
                forKey: "https://scale.example.com/new/\(label)/open/\(call).jpg",
                metadata: metadata
            )
        }
        return (result, full.statistics.trimmed - before)
    }

    /// The sizes of the table (its heap, its TOAST) and of each of its indexes, in MiB.
    func sizes() async throws -> [(String, Double)] {
        let rows = try await self.database.client.query(
            """
            SELECT 'heap', pg_relation_size('cachalot_entries')
            UNION ALL SELECT 'TOAST', pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'cachalot_entries'
            UNION ALL SELECT indexrelid::regclass::text, pg_relation_size(indexrelid)
                FROM pg_index WHERE indrelid = 'cachalot_entries'::regclass
            """
        )
        var sizes: [(String, Double)] = []
        for try await (name, bytes) in rows.decode((String, Int64).self) {
            sizes.append((name, Double(bytes) / Double(1 << 20)))
        }
        return sizes.sorted { $0.0 < $1.0 }
    }

    /// Runs every size in turn and prints its tables.
    mutating func run() async throws {
        try await self.writeTemplates()
        for size in ScalePlan.sizes {
            let perGroup = size / ScalePlan.groups
            let clock = ContinuousClock()
            let start = clock.now
            try await self.fill(groups: 0..<ScalePlan.groups, perGroup: perGroup)
            _ = try await self.database.client.query("VACUUM ANALYZE cachalot_entries").collect()
            // The fill's gigabytes of dirty pages are written now, not during the measurements.
            _ = try await self.database.client.query("CHECKPOINT").collect()
            let filling = clock.now - start
            let rows = try await self.count("SELECT count(*)::bigint FROM cachalot_entries")
            print("### \(grouped(Double(rows))) rows\n")
            print(
                "Filled in \(format(filling.seconds, 1)) s (copies made in SQL, then `VACUUM ANALYZE` and "
                    + "`CHECKPOINT`).\n"
            )

            var hits: [RoundResult] = []
            var purges: [(url: Sample, prefix: Sample, tag: Sample)] = []
            _ = try await self.hits(perGroup: perGroup)  // warm-up
            for _ in 0..<self.rounds {
                hits.append(try await self.hits(perGroup: perGroup))
                purges.append(try await self.purges(perGroup: perGroup))
            }
            Self.printHits(hits)
            Self.printPurges(purges, perGroup: perGroup)

            // Sized at the table's bytes now: its own sets and the open tier's push it over.
            let usage = try await self.database.cache.usage()
            var configuration = self.database.cache.configuration
            configuration.maximumSize = Int(usage.bytes)
            let full = try PostgresCache(configuration: configuration)
            var trims: [(result: RoundResult, trimmed: Int)] = []
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await full.run() }
                defer { group.cancelAll() }
                // Untimed: its first trims, which find the table as it is, before the rounds.
                _ = try await self.trims(full: full, label: "\(size)-warm-up", count: 128)
                for round in 0..<self.rounds {
                    trims.append(try await self.trims(full: full, label: "\(size)-\(round)"))
                }
            }
            Self.printTrims(trims)
            print("#### Sizes after the sets\n")
            print("| relation | MiB |")
            print("|---|---:|")
            for (name, megabytes) in try await self.sizes() { print("| \(name) | \(format(megabytes, 1)) |") }
            print()
        }
    }

    static func printHits(_ rounds: [RoundResult]) {
        print("#### Hits of 4 KiB, keys at random over the table\n")
        print("| round | PostgresCache p50 µs | p99 µs | bare SELECT p50 µs | p99 µs | ratio of p50s | failed |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for (number, round) in rounds.enumerated() {
            print(
                "| \(number + 1) | \(format(round.subject.median.microseconds, 1)) "
                    + "| \(format(round.subject.percentile(0.99).microseconds, 1)) "
                    + "| \(format(round.baseline.median.microseconds, 1)) "
                    + "| \(format(round.baseline.percentile(0.99).microseconds, 1)) | \(format(round.ratio, 2))× "
                    + "| \(round.subject.failures) / \(round.baseline.failures) |"
            )
        }
        print()
    }

    static func printPurges(_ rounds: [(url: Sample, prefix: Sample, tag: Sample)], perGroup: Int) {
        print("#### Purges\n")
        print(
            "| round | URL (1 row) p50 ms | max ms | prefix (\(perGroup) rows) p50 ms | max ms | tag (\(perGroup) rows) p50 ms | max ms |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for (number, round) in rounds.enumerated() {
            var cells: [String] = []
            for sample in [round.url, round.prefix, round.tag] {
                if let failure = sample.lastFailure { print("Round \(number + 1): \(failure)") }
                cells.append(format(sample.median.seconds * 1000, 2))
                cells.append(format((sample.times.max() ?? .zero).seconds * 1000, 2))
            }
            print("| \(number + 1) | \(cells.joined(separator: " | ")) |")
        }
        print()
    }

    static func printTrims(_ rounds: [(result: RoundResult, trimmed: Int)]) {
        print("#### Sets of 4 KiB: a tier at its size, which trims, against one below it\n")
        print(
            "Both write new keys to the one table, in alternating blocks; the tier at its size trims what both add. "
                + "A table at its size removes about a row for each row written, so the trim's time per row removed "
                + "(the difference of the two sides' means, over the rows removed per write of the tier that "
                + "trims) is what trimming costs a write. Both sides also try a trim by age every 64th write, which "
                + "removes nothing here: its cost is in both means, not in their difference.\n"
        )
        print(
            "| round | at its size: mean µs | p50 µs | p99 µs | below: mean µs | p50 µs | p99 µs "
                + "| rows removed per write of both | trim's time per row removed, µs | failed |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for (number, round) in rounds.enumerated() {
            let (full, open) = (round.result.subject, round.result.baseline)
            let perRow = (full.mean - open.mean).microseconds * Double(full.times.count) / Double(max(round.trimmed, 1))
            print(
                "| \(number + 1) | \(format(full.mean.microseconds, 1)) | \(format(full.median.microseconds, 1)) "
                    + "| \(format(full.percentile(0.99).microseconds, 1)) | \(format(open.mean.microseconds, 1)) "
                    + "| \(format(open.median.microseconds, 1)) | \(format(open.percentile(0.99).microseconds, 1)) "
                    + "| \(format(Double(round.trimmed) / Double(max(full.times.count + open.times.count, 1)), 2)) "
                    + "| \(format(perRow, 1)) | \(full.failures) / \(open.failures) |"
            )
        }
        print()
    }
}
