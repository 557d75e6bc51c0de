import CachalotTestOrigin
import CachalotTesting
import Foundation
import Testing

/// `--shared`, `CACHALOT_SHARED`, `stats` and `db init` on a real PostgreSQL server, run as
/// child processes.
@Suite(
    "cachalot with a shared tier, end to end",
    .enabled(if: PostgresCluster.isAvailable, "needs PostgreSQL"),
    .timeLimit(.minutes(2))
)
struct SharedTierCommandTests {
    @Test("a second cache directory gets from the database what the first fetched; stats shows the tier")
    func sharedBetweenDirectories() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], body: "hello")
        }
        defer { origin.stop() }
        try await PostgresCluster.with { cluster in
            let url = origin.url("/a").absoluteString
            let (first, second) = (try CommandLineTool(), try CommandLineTool())
            let fetched = try await first.run(["get", "-v", "--shared", cluster.url(), url])
            #expect(fetched.status == 0 && fetched.output == "hello")
            #expect(fetched.errors.hasPrefix("network"))
            // The database named by the environment this time.
            let shared = try await second.run(["get", "-v", url], environment: ["CACHALOT_SHARED": cluster.url()])
            #expect(shared.status == 0 && shared.output == "hello")
            #expect(shared.errors.hasPrefix("shared"), "\(shared.errors)")
            #expect(origin.requests.count == 1)

            let stats = try await second.json(["stats", "--json", "--shared", cluster.url()]) as? [String: Any]
            let tier = try #require(stats?["shared"] as? [String: Any])
            #expect(tier["entries"] as? Int == 1)
            #expect(tier["hits"] as? Int == 1 && tier["lookups"] as? Int == 1)
            let text = try await second.run(["stats", "--shared", cluster.url()])
            #expect(text.output.contains("shared hits     1 of 1 loads that asked it (100.0 %)"), "\(text.output)")
        }
    }

    @Test(
        "--shared-key signs rows: a node with the key finds them, one with another key does not; a short key is refused"
    )
    func signedRows() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], body: "hello")
        }
        defer { origin.stop() }
        try await PostgresCluster.with { cluster in
            let url = origin.url("/a").absoluteString
            let key = String(repeating: "5f", count: 16)
            let (first, second, third) = (try CommandLineTool(), try CommandLineTool(), try CommandLineTool())
            let fetched = try await first.run(["get", "-v", "--shared", cluster.url(), "--shared-key", key, url])
            #expect(fetched.status == 0 && fetched.errors.hasPrefix("network"), "\(fetched.errors)")
            let shared = try await second.run(
                ["get", "-v", "--shared", cluster.url(), url],
                environment: ["CACHALOT_SHARED_KEY": key]
            )
            #expect(shared.status == 0 && shared.errors.hasPrefix("shared"), "\(shared.errors)")
            let other = try await third.run([
                "get", "-v", "--shared", cluster.url(), "--shared-key", String(repeating: "a0", count: 16), url,
            ])
            #expect(other.status == 0 && other.errors.contains("network"), "\(other.errors)")
            #expect(other.errors.contains("does not carry a valid signature"), "\(other.errors)")
            #expect(origin.requests.count == 2)
            let short = try await first.run(["get", "--shared", cluster.url(), "--shared-key", "5f5f", url])
            #expect(short.status == 64 && short.errors.contains("at least 32"), "\(short.errors)")
        }
    }

    @Test("db init makes the schema, and refuses one of another version with status 1")
    func databaseInitialization() async throws {
        try await PostgresCluster.with { cluster in
            let made = try await Self.cachalot(["db", "init", "--shared", cluster.url()])
            #expect(made.status == 0)
            #expect(made.output.hasPrefix("ready: postgres://postgres@127.0.0.1"))
            #expect(try await cluster.sql("SELECT version FROM cachalot_schema") == "2\n")

            try await cluster.sql("UPDATE cachalot_schema SET version = 7")
            let refused = try await Self.cachalot(["db", "init", "--shared", cluster.url()])
            #expect(refused.status == 1)
            #expect(refused.errors.contains("version 7"), "\(refused.errors)")

            let wrong = try await Self.cachalot(["db", "init", "--shared", "http://127.0.0.1/db"])
            #expect(wrong.status == 64)
            #expect(wrong.errors.contains("is not a database URL"), "\(wrong.errors)")
        }
    }

    static func cachalot(_ arguments: [String]) async throws -> CommandLineTool.Run {
        let child = try ChildProcess.start(CommandLineTool.executable, arguments, capturingOutput: true)
        return await CommandLineTool.finish(child)
    }
}
