import CachalotPostgres
import Foundation
import PostgresNIO

/// One database of the benchmark: the shared tier on it, and a bare postgres-nio client with
/// the pool settings the shared tier gives its own client (8 connections at most, a connect
/// timeout of 2 s, postgres-nio's defaults otherwise). The baseline asks for no TLS; the
/// throwaway server has none to offer (`ssl=off`, which ``settings()`` shows), so the shared
/// tier's connections are plain TCP too.
struct Database {
    let name: String
    let cache: PostgresCache
    let client: PostgresClient
    /// Whether its tables are `UNLOGGED`.
    let isUnlogged: Bool

    /// `maximumSize` is the shared tier's (1 GiB, its default, unless given).
    init(port: Int, name: String, isUnlogged: Bool, maximumSize: Int = 1 << 30) throws {
        let url = DatabaseURL(host: "127.0.0.1", port: port, user: "postgres", database: name)
        self.name = name
        self.isUnlogged = isUnlogged
        self.cache = try PostgresCache(
            // Rows up to 64 MiB, so that 32 MiB values can be measured.
            configuration: .init(
                databases: [url],
                maximumSize: maximumSize,
                writeTimeout: .seconds(10),
                isUnlogged: isUnlogged,
                maximumEntrySize: 64 << 20
            )
        )
        let defaults = self.cache.configuration
        var configuration = PostgresClient.Configuration(
            host: url.host,
            port: url.port,
            username: url.user,
            password: url.password,
            database: url.database,
            tls: .disable
        )
        configuration.options.maximumConnections = defaults.maximumConnections
        configuration.options.connectTimeout = max(defaults.writeTimeout, .seconds(1))
        var logger = Logger(label: "shared-tier-timer")
        logger.logLevel = .critical
        self.client = PostgresClient(configuration: configuration, backgroundLogger: logger)
    }

    /// The statement that makes the baseline's table: the columns of `cachalot_entries`, its
    /// primary key, and nothing else (no sequence, no index on `id`, no trigger).
    var plainTableCreation: PostgresQuery {
        PostgresQuery(
            unsafeSQL: """
                CREATE \(self.isUnlogged ? "UNLOGGED " : "")TABLE plain_entries (
                    digest bytea PRIMARY KEY,
                    id bigint NOT NULL,
                    key bytea NOT NULL,
                    value bytea NOT NULL,
                    metadata bytea NOT NULL,
                    size bigint NOT NULL,
                    checksum bigint NOT NULL,
                    created double precision NOT NULL
                )
                """
        )
    }

    /// Makes the shared tier's schema and the baseline's table, and checks that both tables
    /// are logged or unlogged as asked.
    func prepare() async throws {
        try await self.cache.prepare()
        _ = try await self.client.query(self.plainTableCreation).collect()
        let rows = try await self.client.query(
            """
            SELECT relname, relpersistence FROM pg_class
            WHERE relname IN ('cachalot_entries', 'plain_entries') ORDER BY relname
            """
        )
        var persistence: [String: String] = [:]
        for try await (table, kind) in rows.decode((String, String).self) { persistence[table] = kind }
        let expected = self.isUnlogged ? "u" : "p"
        guard persistence == ["cachalot_entries": expected, "plain_entries": expected] else {
            throw BenchmarkFailure("\(self.name): tables' persistence is \(persistence), not \(expected) for both")
        }
    }

    /// Where the server's WAL is written up to, in bytes: for the whole cluster, so that what
    /// it grows by while one side runs is that side's WAL, give or take the server's own
    /// background work.
    func walPosition() async throws -> Int64 {
        let rows = try await self.client.query("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint")
        for try await position in rows.decode(Int64.self) { return position }
        throw BenchmarkFailure("the server did not answer its WAL position")
    }

    /// The server's version and the settings that matter to writes.
    func settings() async throws -> String {
        let rows = try await self.client.query(
            """
            SELECT current_setting('server_version'), current_setting('fsync'),
                current_setting('synchronous_commit'), current_setting('full_page_writes'),
                current_setting('shared_buffers'), current_setting('ssl')
            """
        )
        for try await (version, fsync, synchronousCommit, fullPageWrites, sharedBuffers, ssl) in rows.decode(
            (String, String, String, String, String, String).self
        ) {
            return "PostgreSQL \(version), fsync=\(fsync), synchronous_commit=\(synchronousCommit), "
                + "full_page_writes=\(fullPageWrites), shared_buffers=\(sharedBuffers), ssl=\(ssl)"
        }
        throw BenchmarkFailure("the server did not answer its settings")
    }
}

/// Runs the connection pools of `databases` around `body`, and stops them after.
func running<Result: Sendable>(
    _ databases: [Database],
    _ body: () async throws -> Result
) async throws -> Result {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for database in databases {
            group.addTask { try await database.cache.run() }
            group.addTask { await database.client.run() }
        }
        defer { group.cancelAll() }
        return try await body()
    }
}
