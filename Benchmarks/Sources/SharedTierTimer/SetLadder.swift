import Foundation
import PostgresNIO

/// Where a set's time goes: a set of a new key of 32 KiB, built up from the bare upsert one part
/// of the shared tier's table and statement at a time, each part on a table of its own, up to
/// `PostgresCache.set` itself. Every round times each step in blocks of calls, the steps' order
/// turning by one each block, so that all see the same drift.
struct SetLadder {
    let database: Database
    let payload: Payload

    /// The steps, in order: each adds one part to the one before.
    static let steps = [
        "bare upsert: primary key only (plain_entries)",
        "+ id from a sequence, and its index",
        "+ the key's index (its first 1,024 bytes)",
        "+ tags and signature, and the tags' GIN index",
        "+ the usage trigger: the shared tier's statement, bare, on cachalot_entries",
        "PostgresCache.set: the Swift side (digest, checksum, tags, timeout, pool; a trim by age every 64th write)",
    ]

    /// Makes the tables of steps 1 to 3, as logged or unlogged as the database's.
    func prepare() async throws {
        let unlogged = self.database.isUnlogged ? "UNLOGGED " : ""
        let columns = """
            digest bytea PRIMARY KEY, id bigint NOT NULL DEFAULT nextval('ladder_id'), key bytea NOT NULL,
            value bytea NOT NULL, metadata bytea NOT NULL, size bigint NOT NULL, checksum bigint NOT NULL,
            created double precision NOT NULL
            """
        let tagged = columns + ", tags text[] NOT NULL DEFAULT '{}', signature bytea NOT NULL DEFAULT ''"
        let statements =
            [
                "CREATE SEQUENCE ladder_id",
                "CREATE \(unlogged)TABLE ladder_sequence (\(columns))",
                "CREATE INDEX ON ladder_sequence (id)",
                "CREATE \(unlogged)TABLE ladder_key (\(columns))",
                "CREATE INDEX ON ladder_key (id)",
                "CREATE INDEX ON ladder_key (substring(key from 1 for 1024))",
            ]
            + [
                "CREATE \(unlogged)TABLE ladder_tags (\(tagged))",
                "CREATE INDEX ON ladder_tags (id)",
                "CREATE INDEX ON ladder_tags (substring(key from 1 for 1024))",
                "CREATE INDEX ON ladder_tags USING gin (tags)",
            ]
        for statement in statements {
            _ = try await self.database.client.query(PostgresQuery(unsafeSQL: statement)).collect()
        }
    }

    /// One round: `count` sets of new keys at each step; a sample per step.
    func round(count: Int, label: String, block: Int = Plan.block) async throws -> [Sample] {
        var samples = Array(repeating: Sample(), count: Self.steps.count)
        var start = 0
        var blockNumber = 0
        while start < count {
            let calls = start..<min(start + block, count)
            for offset in Self.steps.indices {
                let step = (offset + blockNumber) % Self.steps.count
                for call in calls {
                    let key = "https://images.example.com/ladder/\(label)/\(step)/\(call).jpg"
                    // As random as SHA-256's, made before the clock starts.
                    let digest = ByteBuffer(bytes: randomBytes(32))
                    await samples[step].time { try await self.set(step: step, key: key, digest: digest, id: call) }
                }
            }
            start = calls.upperBound
            blockNumber += 1
        }
        return samples
    }

    private func set(step: Int, key: String, digest: ByteBuffer, id: Int) async throws {
        let (value, metadata) = (self.payload.valueBuffer, self.payload.metadataBuffer)
        let keyBytes = ByteBuffer(string: key)
        let size = Int64(keyBytes.readableBytes + value.readableBytes + metadata.readableBytes)
        let created = Date().timeIntervalSince1970
        let checksum = Int64(id)
        let tags: [String] = []
        let signature = ByteBuffer()
        let query: PostgresQuery
        switch step {
        case 0:
            query = """
                INSERT INTO plain_entries (digest, id, key, value, metadata, size, checksum, created)
                VALUES (\(digest), \(Int64(id)), \(keyBytes), \(value), \(metadata), \(size), \(checksum), \(created))
                ON CONFLICT (digest) DO UPDATE SET
                    id = excluded.id, key = excluded.key, value = excluded.value, metadata = excluded.metadata,
                    size = excluded.size, checksum = excluded.checksum, created = excluded.created
                """
        case 1, 2:
            let table = step == 1 ? "ladder_sequence" : "ladder_key"
            query = """
                INSERT INTO \(unescaped: table) (digest, key, value, metadata, size, checksum, created)
                VALUES (\(digest), \(keyBytes), \(value), \(metadata), \(size), \(checksum), \(created))
                ON CONFLICT (digest) DO UPDATE SET
                    id = nextval('ladder_id'), key = excluded.key, value = excluded.value,
                    metadata = excluded.metadata, size = excluded.size, checksum = excluded.checksum,
                    created = excluded.created
                """
        case 3, 4:
            // Step 4 is CacheTable.write's statement, word for word.
            let table = step == 3 ? "ladder_tags" : "cachalot_entries"
            let sequence = step == 3 ? "ladder_id" : "cachalot_entries_id"
            query = """
                INSERT INTO \(unescaped: table) (digest, key, value, metadata, size, checksum, created, tags, signature)
                VALUES (
                    \(digest), \(keyBytes), \(value), \(metadata), \(size), \(checksum), \(created), \(tags), \(signature)
                )
                ON CONFLICT (digest) DO UPDATE SET
                    id = nextval('\(unescaped: sequence)'), key = excluded.key, value = excluded.value,
                    metadata = excluded.metadata, size = excluded.size, checksum = excluded.checksum,
                    created = excluded.created, tags = excluded.tags, signature = excluded.signature
                """
        default:
            try await self.database.cache.set(self.payload.value, forKey: key, metadata: self.payload.metadata)
            return
        }
        _ = try await self.database.client.query(query).collect()
    }

    /// The table of `rounds`: each step's median and mean, and what it adds to the step before.
    static func print(_ rounds: [[Sample]], title: String) {
        Swift.print("#### \(title)\n")
        Swift.print("| step | p50 µs | mean µs | p99 µs | added at the p50s, µs | added at the means, µs |")
        Swift.print("|---|---:|---:|---:|---:|---:|")
        func range(_ values: [Double]) -> String {
            "\(format(values.min() ?? .nan, 0))–\(format(values.max() ?? .nan, 0))"
        }
        for step in Self.steps.indices {
            let medians = rounds.map { $0[step].median.microseconds }
            let means = rounds.map { $0[step].mean.microseconds }
            let tails = rounds.map { $0[step].percentile(0.99).microseconds }
            let added =
                step == 0
                ? ("", "")
                : (
                    range(rounds.map { $0[step].median.microseconds - $0[step - 1].median.microseconds }),
                    range(rounds.map { $0[step].mean.microseconds - $0[step - 1].mean.microseconds })
                )
            Swift.print(
                "| \(Self.steps[step]) | \(range(medians)) | \(range(means)) | \(range(tails)) | \(added.0) | \(added.1) |"
            )
        }
        let failures = rounds.flatMap { $0.compactMap(\.lastFailure) }
        let failed = rounds.reduce(0) { $0 + $1.reduce(0) { $0 + $1.failures } }
        if let failure = failures.last { Swift.print("\nFailed calls: \(failed); the last: \(failure)") }
        Swift.print()
    }
}
