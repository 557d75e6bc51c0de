import CachalotTestOrigin
import CachalotTesting
import Dispatch
import Foundation
import HTTPTypes
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `cachalot get`, run as a child process against a real origin on 127.0.0.1.
@Suite("cachalot get, end to end", .timeLimit(.minutes(1)))
struct GetCommandTests {
    let tool: CommandLineTool

    init() throws {
        self.tool = try CommandLineTool()
    }

    func cachalot(_ arguments: [String]) async throws -> CommandLineTool.Run {
        try await self.tool.run(arguments)
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
        let file = self.tool.directory.path + "/out.txt"
        let result = try await self.cachalot([
            "get", "-q", "-o", file, "-H", "Accept-Language: fr", origin.url("/x").absoluteString,
        ])
        #expect(result.status == 0 && result.output.isEmpty && result.errors.isEmpty)
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "fr")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: self.tool.directory.path).sorted() == [
                "cache", "out.txt",
            ]
        )
    }

    @Test("exit statuses: 2 for an error status, 3 when unreachable, 4 offline and not cached, 64 for a bad URL")
    func exitStatuses() async throws {
        let origin = try await TestOrigin.start { _ in .init(status: 404, body: "missing") }
        defer { origin.stop() }
        let notFound = try await self.cachalot(["get", origin.url("/gone").absoluteString])
        #expect(notFound.status == 2)
        #expect(notFound.errors.contains("404"))
        let unreachable = try await self.cachalot(["get", "http://127.0.0.1:1/x"])
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
                "get", "--cache-dir", self.tool.directory.path + "/cache", "-o",
                self.tool.directory.path + "/\(path.dropFirst())",
                origin.url(path).absoluteString,
            ]
        }
        let children = try ["/a", "/b", "/c", "/d"].map {
            try ChildProcess.start(CommandLineTool.executable, arguments($0))
        }
        for child in children { #expect(await CommandLineTool.offThePool { child.waitForExit().status } == 0) }
        let listed = try await self.cachalot(["get", "-v", "--offline", origin.url("/c").absoluteString])
        #expect(listed.status == 0 && listed.output == String(repeating: "/c", count: 1_000))
    }

    @Test("each failure names what failed and what to do, in one line, with no stack trace")
    func failureMessages() async throws {
        let never = Gate()
        let origin = try await TestOrigin.start { request in
            if request.path == "/slow" { await never.wait() }
            return .init(body: "plain")
        }
        defer {
            never.open()
            origin.stop()
        }
        let cases: [([String], Int32, String)] = [
            (
                ["get", "http://127.0.0.1:1/x"], 3,
                "the connection was refused (check the address and port, and that the server is up)"
            ),
            (["get", "http://no-such-host.invalid/x"], 3, "the host name is unknown (check the host name)"),
            (
                ["get", "https://127.0.0.1:\(origin.port)/x"], 3,
                "(check the scheme, http or https, and the server's certificate)"
            ),
            (
                ["get", "--timeout", "0.5", origin.url("/slow").absoluteString], 3,
                "the server did not answer in time (try a longer --timeout)"
            ),
            (["get", "--max-size", "12 parsecs", origin.url("/x").absoluteString], 64, "'12 parsecs' is invalid"),
        ]
        for (arguments, status, advice) in cases {
            let run = try await self.cachalot(arguments)
            #expect(run.status == status, "\(arguments)")
            #expect(run.errors.contains(advice), "\(run.errors)")
            #expect(!run.errors.contains("Stack") && !run.errors.contains("Fatal error"))
        }
        #if os(Linux)
        let unusable = try await CommandLineTool.finish(
            ChildProcess.start(
                CommandLineTool.executable,
                ["get", "--cache-dir", "/proc/cachalot/x", origin.url("/x").absoluteString],
                capturingOutput: true
            )
        )
        #expect(unusable.status == 1)
        #expect(unusable.errors.hasPrefix("cachalot: cannot use the cache directory /proc/cachalot/x: "))
        #expect(unusable.errors.hasSuffix("(choose another with --cache-dir or CACHALOT_DIR)\n"))
        #endif
    }

    #if os(Linux)
    @Test(
        "on a full disk the body is still written, with a warning that it could not be stored",
        .enabled(if: getuid() == 0, "mounting a tmpfs needs root")
    )
    func fullDisk() async throws {
        let body = String(repeating: "f", count: 600_000)
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], body: body) }
        defer { origin.stop() }
        // The cache directory on a 512 KiB file system: the 600 KB answer cannot be stored.
        let mountPoint = self.tool.cache
        let disk = try Tmpfs(at: mountPoint, size: "512k")
        defer { disk.unmount() }
        let run = try await self.cachalot(["get", "--max-size", "100MB", origin.url("/big").absoluteString])
        #expect(run.status == 0 && run.output == body)
        #expect(run.errors.contains("warning: 1 answer(s) could not be stored in \(mountPoint)"))
        #expect(run.errors.contains("(free some disk space, or lower --max-size)"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: mountPoint + "/tmp").isEmpty)
        let offline = try await self.cachalot(["get", "--offline", origin.url("/big").absoluteString])
        #expect(offline.status == 4)
    }
    #endif
}
