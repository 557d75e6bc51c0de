import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("cachalot get -o: what a killed writer leaves beside the output", .timeLimit(.minutes(1)))
struct OutputLeftoversTests {
    let tool: CommandLineTool

    init() throws {
        self.tool = try CommandLineTool()
    }

    /// The hidden files of writers to `out.bin` in the test's directory.
    func hidden() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: self.tool.directory.path)
            .filter { $0.hasPrefix(".out.bin.cachalot-") }.sorted()
    }

    /// Makes the file at `path` look last written `seconds` ago.
    func age(_ path: String, by seconds: Int) {
        let then = timeval(tv_sec: time(nil) - seconds, tv_usec: 0)
        _ = utimes(path, [then, then])
    }

    @Test(
        "the next write to the same output removes a killed writer's file once a minute old, not a fresh or a held one"
    )
    func nextWriteRemovesLeftovers() async throws {
        let stalled = Gate()
        let origin = try await TestOrigin.start { request in
            var reply = TestOrigin.Reply(fields: [("Cache-Control", "no-store")], data: Data(count: 1_000_000))
            if request.path == "/hang" { reply.stall = (100_000, { stalled.open() }) }
            return reply
        }
        defer { origin.stop() }
        let output = self.tool.directory.path + "/out.bin"
        // A writer killed in the middle: its file stays behind.
        let child = try self.tool.start(["get", "-o", output, origin.url("/hang").absoluteString])
        await stalled.wait()
        // The file is made once the head has arrived; the origin has sent that and more.
        while try self.hidden().isEmpty, !Task.isCancelled { await Task.yield() }
        child.send(SIGKILL)
        _ = await CommandLineTool.finish(child)
        let killed = try #require(try self.hidden().first)
        self.age(self.tool.directory.path + "/" + killed, by: 120)
        // A fresh one (a writer that may have just created it), and an old one a writer holds.
        let fresh = self.tool.directory.path + "/.out.bin.cachalot-fresh"
        let held = self.tool.directory.path + "/.out.bin.cachalot-held"
        #expect(FileManager.default.createFile(atPath: fresh, contents: Data("f".utf8)))
        #expect(FileManager.default.createFile(atPath: held, contents: Data("h".utf8)))
        self.age(held, by: 120)
        let lock = open(held, O_RDONLY)
        defer { close(lock) }
        #expect(flock(lock, LOCK_EX) == 0)

        let run = try await self.tool.run(["get", "-o", output, origin.url("/whole").absoluteString])
        #expect(run.status == 0, "\(run.errors)")
        #expect(try self.hidden() == [".out.bin.cachalot-fresh", ".out.bin.cachalot-held"])
        #expect(self.size(of: output) == 1_000_000)
    }

    func size(of path: String) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }
}
