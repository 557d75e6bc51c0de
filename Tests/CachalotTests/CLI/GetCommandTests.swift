import CachalotTestOrigin
import CachalotTesting
import Dispatch
import Foundation
import HTTPTypes
import Testing

/// `cachalot get`, run as a child process against a real origin on 127.0.0.1.
@Suite("cachalot get, end to end", .timeLimit(.minutes(1)))
struct GetCommandTests {
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    static var executable: String {
        #if os(Linux)
        let tests = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
        let tests = URL(fileURLWithPath: CommandLine.arguments[0])
        #endif
        return tests.deletingLastPathComponent().appendingPathComponent("cachalot").path
    }

    /// Runs `cachalot` with the test's cache directory; returns its exit status, standard output
    /// and standard error.
    func cachalot(_ arguments: [String]) async throws -> (status: Int32, output: String, errors: String) {
        let child = try ChildProcess.start(
            Self.executable,
            [arguments[0], "--cache-dir", self.directory.path + "/cache"] + arguments.dropFirst(),
            capturingOutput: true
        )
        return await Self.offThePool {
            let output = child.readOutput()
            let (status, errors) = child.waitForExit()
            return (status, String(decoding: output, as: UTF8.self), errors)
        }
    }

    /// Runs blocking work on a Dispatch thread: blocking the concurrency pool's few threads would
    /// starve the test origin, which answers on them.
    static func offThePool<Result: Sendable>(_ work: @escaping @Sendable () -> Result) async -> Result {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: work()) }
        }
    }

    @Test("the body goes to standard output; a second process answers from disk without asking")
    func cachedAcrossProcesses() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=600")], body: "hello\n")
        }
        defer { origin.stop() }
        let url = origin.url("/hello?x=1").absoluteString
        let first = try await self.cachalot(["get", "-v", url])
        #expect(first.status == 0)
        #expect(first.output == "hello\n")
        #expect(first.errors.hasPrefix("network · 200 · 6 B"))
        let second = try await self.cachalot(["get", "-v", url])
        #expect(second.status == 0 && second.output == "hello\n")
        #expect(second.errors.hasPrefix("disk · 200 · 6 B"))
        #expect(origin.requests.count == 1)
    }

    @Test("-o writes the file whole, and -H sends header fields")
    func outputFileAndHeaders() async throws {
        let origin = try await TestOrigin.start { request in
            .init(fields: [("Cache-Control", "no-store")], body: request.headerFields[.acceptLanguage] ?? "none")
        }
        defer { origin.stop() }
        let file = self.directory.path + "/out.txt"
        let result = try await self.cachalot([
            "get", "-q", "-o", file, "-H", "Accept-Language: fr", origin.url("/x").absoluteString,
        ])
        #expect(result.status == 0 && result.output.isEmpty && result.errors.isEmpty)
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "fr")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: self.directory.path).sorted() == ["cache", "out.txt"]
        )
    }

    @Test("exit statuses: 2 for an error status, 3 when unreachable, 4 offline and not cached, 64 for a bad URL")
    func exitStatuses() async throws {
        let origin = try await TestOrigin.start { _ in .init(status: 404, body: "missing") }
        defer { origin.stop() }
        let notFound = try await self.cachalot(["get", origin.url("/gone").absoluteString])
        #expect(notFound.status == 2)
        #expect(notFound.errors.contains("404"))
        let unreachable = try await self.cachalot(["get", "--timeout", "1", "http://127.0.0.1:1/x"])
        #expect(unreachable.status == 3)
        #expect(unreachable.errors.contains("could not fetch http://127.0.0.1:1/x"))
        let offline = try await self.cachalot(["get", "--offline", origin.url("/never").absoluteString])
        #expect(offline.status == 4)
        #expect(offline.errors.contains("not in the cache"))
        let bad = try await self.cachalot(["get", "ftp://example.com/x"])
        #expect(bad.status == 64)
        #expect(bad.errors.contains("is not an http or https URL"))
        #expect(origin.requests.count == 1)
    }

    @Test("two processes on one cache directory at once both succeed")
    func twoProcesses() async throws {
        let origin = try await TestOrigin.start { request in
            .init(fields: [("Cache-Control", "max-age=600")], body: String(repeating: request.path ?? "", count: 1_000))
        }
        defer { origin.stop() }
        let arguments = { (path: String) in
            [
                "get", "--cache-dir", self.directory.path + "/cache", "-o",
                self.directory.path + "/\(path.dropFirst())",
                origin.url(path).absoluteString,
            ]
        }
        let children = try ["/a", "/b", "/c", "/d"].map { try ChildProcess.start(Self.executable, arguments($0)) }
        for child in children { #expect(await Self.offThePool { child.waitForExit().status } == 0) }
        let listed = try await self.cachalot(["get", "-v", "--offline", origin.url("/c").absoluteString])
        #expect(listed.status == 0 && listed.output == String(repeating: "/c", count: 1_000))
    }
}
