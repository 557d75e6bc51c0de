import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

/// What the commands do with responses larger than the largest entry the cache stores, and how
/// they say so.
@Suite("cachalot and the largest response stored", .timeLimit(.minutes(1)))
struct StorageLimitTests {
    let tool: CommandLineTool

    init() throws {
        self.tool = try CommandLineTool()
    }

    @Test(
        "prefetch reads no further than the largest entry of a body announced as 20 GB, or of an endless one",
        arguments: [true, false]
    )
    func prefetchStopsAtTheLargestEntry(isAnnounced: Bool) async throws {
        // 2 MB sent, then nothing more: a body that never ends, twice the largest entry.
        let origin = try await TestOrigin.start { _ in
            var reply = TestOrigin.Reply(fields: [("Cache-Control", "max-age=600")], data: Data(count: 2_000_000))
            if isAnnounced {
                reply.fields.append(("Content-Length", "20000000000"))
            } else {
                reply.isChunked = true
            }
            reply.stall = (2_000_000, {})
            return reply
        }
        defer { origin.stop() }
        let url = origin.url("/endless").absoluteString
        let run = try await self.tool.run(["prefetch", "--max-size", "20MB", url])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.errors.contains("not stored     200  "), "\(run.errors)")
        #expect(run.errors.contains("1 not stored: larger than 976.6 KiB, the largest response stored"))
        let (temporary, listed) = try await self.tool.leftovers()
        #expect(listed.isEmpty && temporary.isEmpty)
    }

    @Test("prefetch says which responses it did not store and why; --max-entry-size raises the limit")
    func prefetchSaysWhatItDidNotStore() async throws {
        let origin = try await TestOrigin.start { request in
            if request.path == "/private" {
                return .init(fields: [("Cache-Control", "no-store")], body: "secret")
            }
            return .init(fields: [("Cache-Control", "max-age=600")], data: Data(count: 500_000))
        }
        defer { origin.stop() }
        let urls = (1...5).map { origin.url("/\($0)").absoluteString }
        let refused = try await self.tool.run(
            ["prefetch", "--max-size", "3MB"] + urls + [origin.url("/private").absoluteString]
        )
        #expect(refused.status == 0)
        let lines = refused.errors.split(separator: "\n").map(String.init)
        #expect(
            lines.filter {
                $0.hasPrefix("not stored     200  0 B  http://")
                    && $0.hasSuffix(
                        "(larger than 146.5 KiB, the largest response stored (5 % of --max-size, or --max-entry-size))"
                    )
            }.count == 5,
            "\(refused.errors)"
        )
        #expect(lines.contains { $0.hasPrefix("6 URLs in ") && $0.hasSuffix(": 6 not stored (0 B), 0 failed") })
        #expect(
            lines.contains(
                "  5 not stored: larger than 146.5 KiB, the largest response stored (5 % of --max-size, or --max-entry-size)"
            )
        )
        #expect(lines.contains("  1 not stored: the response's header fields do not allow storing it"))
        #expect(try await self.tool.leftovers().listed.isEmpty)

        let stored = try await self.tool.run(["prefetch", "--max-size", "3MB", "--max-entry-size", "1MB"] + urls)
        #expect(stored.errors.contains(": 5 fetched (2.4 MiB), 0 failed"), "\(stored.errors)")
        #expect(try await self.tool.leftovers().listed.count == 5)

        let help = try await self.tool.run(["prefetch", "--help"])
        #expect(help.output.contains("5 % of"), "\(help.output)")
        #expect(help.output.contains("--max-entry-size"))
    }

    @Test("get -v says that a body larger than the largest entry was not stored, and why")
    func getSaysWhatItDidNotStore() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=600")], data: Data(count: 500_000))
        }
        defer { origin.stop() }
        let output = self.tool.directory.path + "/body"
        let run = try await self.tool.run([
            "get", "-v", "--max-size", "3MB", "-o", output, origin.url("/big").absoluteString,
        ])
        #expect(run.status == 0)
        #expect(run.errors.contains("network · 200 · 488.3 KiB"), "\(run.errors)")
        #expect(
            run.errors.contains("· not stored: larger than 146.5 KiB, the largest response stored"),
            "\(run.errors)"
        )
        #expect(try FileManager.default.attributesOfItem(atPath: output)[.size] as? Int == 500_000)
        #expect(try await self.tool.leftovers().listed.isEmpty)
    }
}
