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

/// Ctrl-C while `cachalot` downloads.
@Suite("cachalot interrupted, end to end", .timeLimit(.minutes(1)))
struct InterruptTests {
    let tool: CommandLineTool

    init() throws {
        self.tool = try CommandLineTool()
    }

    /// An origin whose `/hang` sends 1 MiB of a 20 MiB body (large enough to stream to a
    /// temporary file), opens `reached`, and then hangs; other paths answer at once.
    func origin(_ reached: Gate) async throws -> TestOrigin {
        try await TestOrigin.start { request in
            var reply = TestOrigin.Reply(fields: [("Cache-Control", "max-age=600")], data: Data(count: 20 << 20))
            guard request.path == "/hang" else { return .init(fields: [("Cache-Control", "max-age=600")], body: "ok") }
            reply.stall = (1 << 20, { reached.open() })
            return reply
        }
    }

    /// Sends SIGINT to `child` once the origin hangs; returns how the child ended.
    func interrupt(_ child: ChildProcess, when reached: Gate) async -> CommandLineTool.Run {
        await reached.wait()
        child.send(SIGINT)
        return await CommandLineTool.finish(child)
    }

    /// The cache's temporary files, and the URLs `cachalot ls` lists.
    func leftovers() async throws -> (temporary: [String], listed: [String]) {
        try await self.tool.leftovers()
    }

    @Test("get exits with 130 and leaves no entry, no temporary file and no output file")
    func interruptedGet() async throws {
        let reached = Gate()
        let origin = try await self.origin(reached)
        defer { origin.stop() }
        let output = self.tool.directory.path + "/out.bin"
        let child = try self.tool.start(["get", "-o", output, origin.url("/hang").absoluteString])
        let run = await self.interrupt(child, when: reached)
        #expect(run.status == 130)
        #expect(run.errors.contains("cachalot: interrupted; nothing partial was kept"))
        let (temporary, listed) = try await self.leftovers()
        #expect(temporary.isEmpty && listed.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: self.tool.directory.path) == ["cache"])
    }

    @Test("prefetch exits with 130; what finished stays cached, what hung leaves nothing")
    func interruptedPrefetch() async throws {
        let reached = Gate()
        let origin = try await self.origin(reached)
        defer { origin.stop() }
        let quick = origin.url("/quick").absoluteString
        // The 20 MiB body is one prefetch stores (and so reads), not one it leaves unread.
        let child = try self.tool.start([
            "prefetch", "--max-entry-size", "100MB", "--concurrency", "1", quick, origin.url("/hang").absoluteString,
            origin.url("/never").absoluteString,
        ])
        let run = await self.interrupt(child, when: reached)
        #expect(run.status == 130)
        // The load it cancelled is no failure: no line says so, and there is no summary.
        #expect(!run.errors.contains("failed") && run.errors.hasSuffix("interrupted; nothing partial was kept\n"))
        let (temporary, listed) = try await self.leftovers()
        #expect(temporary.isEmpty)
        #expect(listed == [quick])
        #expect(!origin.requests.contains { $0.path == "/never" })
    }

    @Test(
        "get of a small storable body, stalled midway, stops at SIGINT or SIGTERM with 130 or 143 and stores nothing",
        arguments: [SIGINT, SIGTERM]
    )
    func interruptedSmallGet(signal: Int32) async throws {
        // 120 bytes, storable and fresh: a body that collapsed loads may share, read by the
        // loader's own pump, which once went on after the signal to the body's end and stored it.
        let origin = try await TestOrigin.start { _ in
            var reply = TestOrigin.Reply(fields: [("Cache-Control", "max-age=600")], data: Data(count: 120))
            reply.stall = (10, {})
            return reply
        }
        defer { origin.stop() }
        let child = try self.tool.start(["get", origin.url("/small").absoluteString])
        // The signal comes once the first bytes are written out: the head is long past, and
        // the body is being read.
        let written = await CommandLineTool.offThePool {
            var buffer = [UInt8](repeating: 0, count: 64)
            var total = 0
            while total < 10 {
                let count = read(child.output, &buffer, buffer.count)
                guard count > 0 else { break }
                total += count
            }
            return total
        }
        #expect(written == 10)
        child.send(signal)
        let run = await CommandLineTool.finish(child)
        #expect(run.status == 128 + signal, "\(run.errors)")
        #expect(run.errors.contains("cachalot: interrupted; nothing partial was kept"))
        let (temporary, listed) = try await self.leftovers()
        #expect(temporary.isEmpty && listed.isEmpty)
    }
}
