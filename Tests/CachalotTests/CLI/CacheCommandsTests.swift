import Cachalot
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

/// `cachalot ls`, `stats`, `purge`, `trim`, `clear` and `--max-size`, run as child processes.
@Suite("cachalot ls, stats and removals, end to end", .timeLimit(.minutes(1)))
struct CacheCommandsTests {
    let tool: CommandLineTool

    init() throws {
        self.tool = try CommandLineTool()
    }

    /// An origin with a fresh response that has an ETag, a stale one that has Last-Modified,
    /// and one that varies on Accept-Language.
    func origin() async throws -> TestOrigin {
        try await TestOrigin.start { request in
            switch request.path {
            case "/fresh":
                .init(fields: [("Cache-Control", "max-age=600"), ("ETag", "\"v1\"")], body: "fresh")
            case "/stale":
                .init(
                    fields: [("Cache-Control", "max-age=0"), ("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")],
                    body: "stale!"
                )
            default:
                .init(
                    fields: [("Cache-Control", "max-age=600"), ("Vary", "Accept-Language")],
                    body: request.headerFields[.acceptLanguage] ?? ""
                )
            }
        }
    }

    @Test("ls lists each response with its size, age, freshness and validators, as a table and as JSON")
    func list() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        for path in ["/fresh", "/stale"] {
            #expect(try await self.tool.run(["get", origin.url(path).absoluteString]).status == 0)
        }
        #expect(
            try await self.tool.run(["get", "-H", "Accept-Language: fr", origin.url("/vary").absoluteString]).status
                == 0
        )

        let listed = try #require(try await self.tool.json(["ls", "--json"]) as? [[String: Any]])
        #expect(
            listed.map { $0["url"] as? String } == ["/fresh", "/stale", "/vary"].map { origin.url($0).absoluteString }
        )
        try #require(listed.count == 3)
        let (fresh, stale, vary) = (listed[0], listed[1], listed[2])
        #expect(fresh["size"] as? Int == 5 && fresh["status"] as? Int == 200)
        #expect(fresh["fresh"] as? Bool == true && fresh["freshnessLifetime"] as? Int == 600)
        #expect(fresh["etag"] as? String == "\"v1\"" && fresh["lastModified"] == nil)
        #expect((fresh["age"] as? Int).map { (0..<60).contains($0) } == true)
        #expect(stale["fresh"] as? Bool == false && stale["size"] as? Int == 6)
        #expect(stale["lastModified"] as? String == "Mon, 02 Jan 2006 15:04:05 GMT")
        #expect(vary["vary"] as? [String: String] == ["accept-language": "fr"] && vary["size"] as? Int == 2)

        let table = try await self.tool.run(["ls"])
        let rows = table.output.split(separator: "\n").map(String.init)
        #expect(rows.count == 4)
        #expect(rows[0].hasPrefix("STATUS  SIZE  AGE"))
        // 600 s left shows as 10m, anything less as 9m: it depends on whether a second began since the get.
        let freshLeft = rows[1].contains("fresh, 9m") || rows[1].contains("fresh, 10m")
        #expect(rows[1].contains("200     5 B") && freshLeft && rows[1].contains("ETag "))
        #expect(rows[2].contains("stale") && rows[2].contains("Last-Modified"))
        #expect(rows[3].hasSuffix(origin.url("/vary").absoluteString + " (accept-language: fr)"))
        #expect(table.errors == "3 responses, 13 B of bodies\n")
    }

    @Test("stats counts requests, hits and bytes saved across runs, and gives the size against the limit")
    func statistics() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        let url = origin.url("/fresh").absoluteString
        for _ in 0..<3 { #expect(try await self.tool.run(["get", url]).status == 0) }
        let report = try #require(try await self.tool.json(["stats", "--json"]) as? [String: Any])
        #expect(report["entries"] as? Int == 1)
        #expect(report["requests"] as? Int == 3 && report["hits"] as? Int == 2)
        #expect(report["hitRatio"] as? Double == 2.0 / 3.0)
        #expect(report["bytesSaved"] as? Int == 10 && report["bytesDownloaded"] as? Int == 5)
        #expect(report["sizeLimit"] as? Int == DiskCache.Configuration().sizeLimit)
        #expect((report["size"] as? Int ?? 0) > 5)
        #expect(report["oldest"] is String && report["since"] is String)

        let text = try await self.tool.run(["stats"])
        #expect(text.output.contains("hits            2 (66.7 %): 2 fresh, 0 revalidated (304), 0 stale"))
        #expect(text.output.contains("bytes saved     10 B"))
    }

    @Test("purge removes what was stored longer ago than a duration, and says what it removed")
    func purge() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        // An entry stored two days ago, by a cache on a clock set back.
        let twoDaysAgo = Date().addingTimeInterval(-2 * 86_400)
        let old = try DiskCache(directory: URL(filePath: self.tool.cache), now: { twoDaysAgo })
        try old.set(Data("old".utf8), forKey: "http://old.example/")
        #expect(try await self.tool.run(["get", origin.url("/fresh").absoluteString]).status == 0)
        let none = try await self.tool.run(["purge", "--older-than", "3d"])
        #expect(none.output.hasPrefix("removed 0 entries (0 B) stored over 3d ago; 2 left"))
        let purged = try await self.tool.run(["purge", "--older-than", "1d12h"])
        #expect(purged.status == 0)
        #expect(purged.output.hasPrefix("removed 1 entries ("))
        #expect(purged.output.contains("stored over 1d 12h ago; 1 left"))
        let bad = try await self.tool.run(["purge", "--older-than", "3 fortnights"])
        #expect(bad.status == 64 && bad.errors.contains("'3 fortnights' is invalid for '--older-than"))
    }

    @Test("trim removes the least recently used first, clear removes the rest, each saying what went")
    func trimAndClear() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=600")], body: String(repeating: "z", count: 10_000))
        }
        defer { origin.stop() }
        for path in ["/1", "/2", "/3"] {
            #expect(try await self.tool.run(["get", origin.url(path).absoluteString]).status == 0)
        }
        let trimmed = try await self.tool.run(["trim", "--to", "25KB"])
        #expect(trimmed.status == 0 && trimmed.output.hasPrefix("removed 1 entries ("))
        #expect(trimmed.output.contains("to fit in 24.4 KiB; 2 left"))
        let listed = try #require(try await self.tool.json(["ls", "--json"]) as? [[String: Any]])
        #expect(listed.compactMap { $0["url"] as? String } == ["/2", "/3"].map { origin.url($0).absoluteString })
        let cleared = try await self.tool.run(["clear"])
        #expect(cleared.output.hasPrefix("removed 2 entries (") && cleared.output.hasSuffix("; 0 left (0 B)\n"))
        let bad = try await self.tool.run(["trim", "--to", "lots"])
        #expect(bad.status == 64)
    }

    @Test("--max-size is kept for the directory: later runs without it keep to it")
    func keptMaximumSize() async throws {
        let origin = try await TestOrigin.start { _ in
            // With its head, each entry's file takes one 4 KiB block: 24 of them fit in 100 KB.
            .init(fields: [("Cache-Control", "max-age=600")], body: String(repeating: "m", count: 3_000))
        }
        defer { origin.stop() }
        #expect(try await self.tool.run(["get", "--max-size", "100KB", origin.url("/0").absoluteString]).status == 0)
        let urls = (1..<30).map { origin.url("/\($0)").absoluteString }
        #expect(try await self.tool.run(["prefetch"] + urls).status == 0)
        let report = try #require(try await self.tool.json(["stats", "--json"]) as? [String: Any])
        #expect(report["sizeLimit"] as? Int == 100_000)
        #expect((report["entries"] as? Int).map { (20..<30).contains($0) } == true)
        #expect((report["size"] as? Int ?? .max) <= 100_000)
    }
}
