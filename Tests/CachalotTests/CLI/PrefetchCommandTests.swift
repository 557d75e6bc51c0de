import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing

/// `cachalot prefetch`, run as a child process against a real origin on 127.0.0.1.
@Suite("cachalot prefetch, end to end", .timeLimit(.minutes(1)))
struct PrefetchCommandTests {
    let tool: CommandLineTool

    init() throws {
        self.tool = try CommandLineTool()
    }

    @Test("loads the URLs --concurrency at a time; a second run finds them fresh; failures are summed up with reasons")
    func prefetchesAndSummarizes() async throws {
        let arrivals = Countdown()
        let inFlight = Mutex((now: 0, most: 0))
        let origin = try await TestOrigin.start { request in
            inFlight.withLock { $0 = ($0.now + 1, max($0.most, $0.now + 1)) }
            defer { inFlight.withLock { $0.now -= 1 } }
            // The first two wait for each other: loading one at a time would never end.
            arrivals.increment()
            await arrivals.wait(for: 2)
            if request.path == "/missing" { return .init(status: 404, body: "no") }
            return .init(fields: [("Cache-Control", "max-age=600")], body: String(repeating: "x", count: 1_000))
        }
        defer { origin.stop() }
        let paths = ["/a", "/b", "/c", "/d", "/missing"]
        let first = try await self.tool.run(
            ["prefetch", "--concurrency", "2"] + paths.map { origin.url($0).absoluteString }
        )
        #expect(first.status == 2)
        #expect(first.output.isEmpty)
        let lines = first.errors.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasPrefix("fetched        200  1000 B  http://127.0.0.1") }.count == 4)
        #expect(lines.contains { $0.hasPrefix("5 URLs in ") && $0.hasSuffix(": 4 fetched (3.9 KiB), 1 failed") })
        #expect(lines.last == "  the server answered 404 Not Found for \(origin.url("/missing").absoluteString)")
        #expect(inFlight.withLock { $0.most } == 2)
        #expect(origin.requests.count == 5)

        let list = self.tool.directory.path + "/urls.txt"
        let text = "# fresh ones\n\n" + ["/a", "/b"].map { origin.url($0).absoluteString + "\n" }.joined()
        #expect(FileManager.default.createFile(atPath: list, contents: Data(text.utf8)))
        let second = try await self.tool.run(["prefetch", "-i", list])
        #expect(second.status == 0)
        #expect(second.errors.contains(": 2 already fresh (2.0 KiB), 0 failed"))
        #expect(origin.requests.count == 5)
    }

    @Test("-i - reads standard input; a line that is not a URL is a usage error that names it, and nothing loads")
    func standardInputAndBadLines() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "x") }
        defer { origin.stop() }
        let list = self.tool.directory.path + "/urls.txt"
        let text = origin.url("/a").absoluteString + "\n  \n" + origin.url("/b").absoluteString + "\n"
        #expect(FileManager.default.createFile(atPath: list, contents: Data(text.utf8)))
        let good = try await self.tool.run(["prefetch", "-i", "-"], input: list)
        #expect(good.status == 0 && good.errors.contains("2 URLs in "))
        #expect(Set(origin.requests.map(\.path)) == ["/a", "/b"])

        let bad = self.tool.directory.path + "/bad.txt"
        let badText = origin.url("/c").absoluteString + "\nexample.com/d\n"
        #expect(FileManager.default.createFile(atPath: bad, contents: Data(badText.utf8)))
        let refused = try await self.tool.run(["prefetch", "-i", bad])
        #expect(refused.status == 64)
        #expect(refused.errors.contains("line 2 of \(bad) is not an http or https URL"))
        let neither = try await self.tool.run(["prefetch"])
        #expect(neither.status == 64)
        #expect(origin.requests.count == 2)
    }

    @Test("on a terminal a progress bar is redrawn in place, with count, bytes and rate; not a line per URL")
    func progressBarOnTerminal() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: String(repeating: "y", count: 2_048)) }
        defer { origin.stop() }
        let run = try await self.tool.run(
            ["prefetch", "--concurrency", "1", origin.url("/1").absoluteString, origin.url("/2").absoluteString],
            errorsToTerminal: true
        )
        #expect(run.status == 0)
        #expect(run.errors.contains("\r[############............] 1/2  2.0 KiB  "))
        #expect(run.errors.contains("\r[########################] 2/2  4.0 KiB  "))
        #expect(run.errors.contains("2 URLs in "))
        #expect(!run.errors.contains("fetched        200"))
    }
}
