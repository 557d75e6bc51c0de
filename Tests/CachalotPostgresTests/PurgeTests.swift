import Cachalot
import CachalotTesting
import Foundation
import Logging
import PostgresNIO
import Testing

@testable import CachalotPostgres

/// Purges of the PostgreSQL store by URL, prefix and tag, against a real server with a table of
/// 20,000 rows: what they remove, and that their plans read the rows through indexes.
@Suite(.enabled(if: PostgresCluster.isAvailable, "needs PostgreSQL"), .timeLimit(.minutes(2)))
struct PurgeTests {
    /// 20,000 rows keyed `http://h/p<i % 200>/<i>`, tagged `t<i % 1000>` and `all`, and one
    /// variant of `http://h/p7/7` (its key, a line feed, and the variant's fields); analyzed.
    static let rows = """
        INSERT INTO cachalot_entries (digest, key, value, metadata, size, checksum, created, tags)
        SELECT sha256(k), k, 'v', '', length(k) + 1, 0, 0, ARRAY['t' || (i % 1000), 'all']
        FROM generate_series(0, 19999) AS i, convert_to('http://h/p' || (i % 200) || '/' || i, 'UTF8') AS k;
        INSERT INTO cachalot_entries (digest, key, value, metadata, size, checksum, created)
        SELECT sha256(k), k, 'v', '', length(k) + 1, 0, 0 FROM convert_to(E'http://h/p7/7\\nen', 'UTF8') AS k;
        ANALYZE cachalot_entries;
        """

    @Test func aPurgeByURLPrefixOrTagRemovesItsRowsAndNoOthersThroughAnIndex() async throws {
        try await PostgresCluster.with { cluster in
            let cache = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(cache) {
                try await cache.prepare()
                try await cluster.sql(Self.rows)
                #expect(try await cache.usage().entries == 20_001)
                for removal in [CacheRemoval.url("http://h/p7/7"), .prefix("http://h/p7/"), .tag("t5")] {
                    let plan = try await Self.plan(of: #require(CacheTable.purge(removal)), on: cluster)
                    #expect(!plan.contains("Seq Scan"), "\(removal): \(plan)")
                    #expect(plan.contains("cachalot_entries_by_"), "\(removal): \(plan)")
                }
                // The URL and its variant; not http://h/p7/7007, whose key starts with the URL's.
                #expect(try await cache.removeValues(matching: .url("http://h/p7/7")) == 2)
                #expect(
                    try await cluster.sql("SELECT count(*) FROM cachalot_entries WHERE key = 'http://h/p7/7007'")
                        == "1\n"
                )
                // The other 99 of p7/, not p70/ to p79/.
                #expect(try await cache.removeValues(matching: .prefix("http://h/p7/")) == 99)
                #expect(
                    try await cluster.sql("SELECT count(*) FROM cachalot_entries WHERE key LIKE 'http://h/p70/%'")
                        == "100\n"
                )
                // 20 rows are tagged t5 (i = 5, 1005, …): in batches of 1,000 for `all`, below.
                #expect(try await cache.removeValues(matching: .tag("t5")) == 20)
                #expect(try await cache.removeValues(matching: .tag("t5")) == 0)
                #expect(try await cache.usage().entries == 20_001 - 2 - 99 - 20)
                #expect(try await cache.removeValues(matching: .tag("all")) == 20_001 - 2 - 99 - 20)
                #expect(try await cache.usage() == .init(entries: 0, bytes: 0))
            }
        }
    }

    @Test func aSchemaOfVersionOneIsUpgradedAndItsUntaggedRowsAreDropped() async throws {
        try await PostgresCluster.with { cluster in
            let cache = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(cache) { try await cache.set(Data("a".utf8), forKey: "a", metadata: Data()) }
            // Version 1 as it was: no tags, no key or tag index.
            try await cluster.sql(
                """
                DROP INDEX cachalot_entries_by_key, cachalot_entries_by_tag;
                ALTER TABLE cachalot_entries DROP COLUMN tags, DROP COLUMN signature;
                UPDATE cachalot_schema SET version = 1;
                """
            )
            let upgraded = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(upgraded) {
                #expect(try await upgraded.entry(forKey: "a") == nil)
                #expect(try await upgraded.usage() == .init(entries: 0, bytes: 0))
                try await upgraded.set(Data("b".utf8), forKey: "b", metadata: Data())
                #expect(try await upgraded.entry(forKey: "b")?.data == Data("b".utf8))
            }
            #expect(try await cluster.sql("SELECT version FROM cachalot_schema") == "2\n")
            #expect(
                try await cluster.sql(
                    "SELECT count(*) FROM pg_indexes WHERE indexname IN ('cachalot_entries_by_key', 'cachalot_entries_by_tag')"
                ) == "2\n"
            )
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The plan PostgreSQL makes for `query` with its values, as `EXPLAIN` prints it.
    static func plan(of query: PostgresQuery, on cluster: PostgresCluster) async throws -> String {
        let configuration = PostgresConnection.Configuration(
            host: "127.0.0.1",
            port: cluster.port,
            username: "postgres",
            password: nil,
            database: "postgres",
            tls: .disable
        )
        let connection = try await PostgresConnection.connect(
            configuration: configuration,
            id: 1,
            logger: Logger(label: "purge-tests")
        )
        let explain = PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, binds: query.binds)
        var lines: [String] = []
        do {
            let rows = try await connection.query(explain, logger: Logger(label: "purge-tests"))
            for try await line in rows.decode(String.self) { lines.append(line) }
        } catch {
            try? await connection.close()
            throw Failure(description: String(reflecting: error))
        }
        try await connection.close()
        return lines.joined(separator: "\n")
    }
}
