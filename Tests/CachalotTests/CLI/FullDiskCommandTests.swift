import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

#if canImport(Glibc)
import Glibc
#endif

#if os(Linux)
/// The commands on a cache directory whose disk is full: answers still reach the user.
@Suite(
    "cachalot on a full disk",
    .enabled(if: getuid() == 0, "mounting a tmpfs needs root"),
    .timeLimit(.minutes(1))
)
struct FullDiskCommandTests {
    let tool: CommandLineTool

    init() throws {
        self.tool = try CommandLineTool()
    }

    static func origin() async throws -> TestOrigin {
        try await TestOrigin.start { request in
            .init(fields: [("Cache-Control", "max-age=600")], body: "body of \(request.path ?? "")")
        }
    }

    @Test("clear of an empty cache on a full disk succeeds")
    func clearEmpty() async throws {
        let disk = try Tmpfs(at: self.tool.cache, size: "256k")
        defer { disk.unmount() }
        #expect(try await self.tool.run(["ls"]).status == 0)
        try disk.fill()
        let run = try await self.tool.run(["clear"])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == "removed 0 entries (0 B); 0 left (0 B)\n")
    }

    @Test("get into a new cache directory on a full disk delivers the body, with a warning")
    func getIntoNewCache() async throws {
        let origin = try await Self.origin()
        defer { origin.stop() }
        let disk = try Tmpfs(at: self.tool.cache, size: "256k")
        defer { disk.unmount() }
        try disk.fill()
        let run = try await self.tool.run(["get", origin.url("/a").absoluteString])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == "body of /a")
        #expect(run.errors.contains("warning: cannot use the cache directory \(self.tool.cache)"), "\(run.errors)")
        #expect(run.errors.contains("going on without it"))
    }

    @Test("get delivers the body when the new --max-size cannot be kept in cachalot.state, with a warning")
    func getWhenStateCannotBeWritten() async throws {
        let origin = try await Self.origin()
        defer { origin.stop() }
        let disk = try Tmpfs(at: self.tool.cache, size: "256k")
        defer { disk.unmount() }
        #expect(try await self.tool.run(["get", origin.url("/a").absoluteString]).status == 0)
        try disk.fill()
        let run = try await self.tool.run(["get", "--max-size", "100MB", origin.url("/b").absoluteString])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == "body of /b")
        #expect(run.errors.contains("warning: --max-size could not be kept for \(self.tool.cache)"), "\(run.errors)")
    }
}
#endif
