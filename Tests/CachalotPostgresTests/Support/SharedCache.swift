import Cachalot
import CachalotPostgres
import CachalotTesting
import Foundation

/// Runs `cache`'s connection pools around `body`, and stops them after.
func running<Result: Sendable>(
    _ cache: PostgresCache,
    _ body: () async throws -> Result
) async throws -> Result {
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await cache.run() }
        do {
            let result = try await body()
            group.cancelAll()
            return result
        } catch {
            group.cancelAll()
            throw error
        }
    }
}

extension PostgresCache.Configuration {
    /// A configuration for tests on `databases`: a database that fails is tried again at once
    /// (no test waits for a retry interval), and reads wait long enough for a loaded machine.
    static func testing(_ databases: [DatabaseURL]) -> Self {
        PostgresCache.Configuration(databases: databases, readTimeout: .seconds(5), retryInterval: .zero)
    }
}

extension PostgresCluster {
    /// `database` on this server, for the user `postgres`.
    func database(_ name: String = "postgres") -> DatabaseURL {
        DatabaseURL(host: "127.0.0.1", port: self.port, user: "postgres", database: name)
    }
}
