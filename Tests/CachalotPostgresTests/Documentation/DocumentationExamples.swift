import Cachalot
import CachalotAsyncHTTPClient
import CachalotPostgres
import Foundation

/// The Swift examples of `CachalotPostgres.docc`, copied here line for line so that they compile
/// with the tests (`scripts/check-doc-snippets` fails when an article's example is not found
/// here or in another `Tests/*/Documentation` file). They need a database at a fixed address and
/// the internet, so they are compiled, never run; the behaviour they show is tested in
/// `SharedLoadingTests` against real PostgreSQL servers.
enum DocumentationExamples {
    /// CachalotPostgres.md: a loader over a shared tier, with the tier's pools running.
    static func sharedTier(cacheDirectory: URL) async throws {
        let shared = try PostgresCache(
            configuration: .init(databases: [DatabaseURL("postgres://cachalot@db.internal/cache")])
        )
        let loader = try ResourceLoader(
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: cacheDirectory),
            shared: [shared]
        )
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await shared.run() }  // its connection pools, for as long as it is used
            try await shared.prepare()  // connected, schema ready
            let resource = try await loader.load(URL(string: "https://example.com/a.png")!)
            print(resource.source)  // .network here; .shared on the next machine that loads it
            group.cancelAll()
        }
    }
}
