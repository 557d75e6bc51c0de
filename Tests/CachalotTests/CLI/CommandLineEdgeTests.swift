import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

@Suite("cachalot at the edges of its command line", .timeLimit(.minutes(1)))
struct CommandLineEdgeTests {
    let tool: CommandLineTool

    init() throws {
        self.tool = try CommandLineTool()
    }

    @Test("an empty --cache-dir is a usage error, not the default directory")
    func emptyCacheDirectory() async throws {
        let run = try await self.tool.run(["get", "--cache-dir", "", "http://127.0.0.1:9/x"])
        #expect(run.status == 64)
        #expect(run.errors.contains("--cache-dir is empty"), "\(run.errors)")
    }

    @Test("a --max-size below 64 KiB is a usage error", arguments: ["1", "65535"])
    func tinyLimit(size: String) async throws {
        let run = try await self.tool.run(["get", "--max-size", size, "http://127.0.0.1:9/x"])
        #expect(run.status == 64)
        #expect(run.errors.contains("--max-size must be at least 64KiB"), "\(run.errors)")
    }

    @Test("a scheme in capitals is the same scheme", arguments: ["HTTP", "Http"])
    func schemeInCapitals(scheme: String) async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "hi") }
        defer { origin.stop() }
        let url = origin.url("/a").absoluteString.replacingOccurrences(of: "http:", with: scheme + ":")
        let run = try await self.tool.run(["get", url])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == "hi")
        let listed = try await self.tool.run(["ls"])
        #expect(listed.output.contains(origin.url("/a").absoluteString))
        let prefetched = try await self.tool.run(["prefetch", url])
        #expect(prefetched.status == 0, "\(prefetched.errors)")
    }

    @Test("--max-time ends a transfer that takes longer with status 3, keeping nothing partial")
    func maximumTime() async throws {
        let origin = try await TestOrigin.start { _ in
            var reply = TestOrigin.Reply(fields: [("Cache-Control", "max-age=60")], data: Data(count: 100_000))
            reply.stall = (1_000, {})
            return reply
        }
        defer { origin.stop() }
        let output = self.tool.directory.path + "/out.bin"
        let run = try await self.tool.run([
            "get", "--max-time", "0.5", "-o", output, origin.url("/slow").absoluteString,
        ])
        #expect(run.status == 3, "\(run.errors)")
        #expect(run.errors.contains("the transfer took longer than --max-time 0.5 s"), "\(run.errors)")
        #expect(!FileManager.default.fileExists(atPath: output))
        let listed = try #require(try await self.tool.json(["ls", "--json"]) as? [[String: Any]])
        #expect(listed.isEmpty)
    }
}
