import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The command line under hostile input and unlucky circumstances: it never traps, never
/// writes through a planted link or over a device, and says what went wrong.
@Suite("cachalot under hostile input, end to end", .timeLimit(.minutes(1)))
struct HardeningTests {
    let tool: CommandLineTool

    init() throws {
        self.tool = try CommandLineTool()
    }

    /// Statuses a trap or a crash ends with: SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGSEGV.
    static let crashes: Set<Int32> = [132, 133, 134, 135, 139]

    @Test(
        "a reader that closes standard output early ends the command by its own hand with 141, not a trap",
        arguments: ["get from the network", "get from the disk", "ls"]
    )
    func closedPipe(command: String) async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=600")], data: Data(count: 4 << 20))
        }
        defer { origin.stop() }
        let url = origin.url("/big").absoluteString
        if command != "get from the network" {
            #expect(try await self.tool.run(["get", "-o", self.tool.directory.path + "/first", url]).status == 0)
        }
        let child = try self.tool.start(command == "ls" ? ["ls"] : ["get", url])
        let run = await CommandLineTool.offThePool {
            var buffer = [UInt8](repeating: 0, count: 10)
            if command != "ls" { _ = read(child.output, &buffer, 10) }
            return child.closeOutputAndWaitForExit()
        }
        // Ended by its own hand, after its bookkeeping, not by SIGPIPE in the middle of a write.
        #expect(run.status == 141 && run.signal == 0, "\(run.errors)")
        #expect(!run.errors.contains("Fatal error"))
    }

    @Test("a status below 100 with a body fails that get with status 3 and a clear message; nothing traps")
    func statusBelow100() async throws {
        let origin = try await RawOrigin.start { _ in
            .init("HTTP/1.1 099 Odd\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
        }
        defer { origin.stop() }
        let run = try await self.tool.run(["get", origin.url("/s").absoluteString])
        // AsyncHTTPClient 1.37 trapped here (HTTPRequestStateMachine.swift:596); the tool's own
        // transport refuses the answer instead.
        #expect(!Self.crashes.contains(run.status), "\(run.errors)")
        #expect(run.status == 3)
        #expect(run.errors.contains("status 99"), "\(run.errors)")
    }

    @Test(
        "numbers out of range on the command line are usage errors, not traps",
        arguments: [
            ["get", "--timeout", "inf", "http://127.0.0.1:1/"], ["get", "--timeout", "1e300", "http://127.0.0.1:1/"],
            ["get", "--timeout", "nan", "http://127.0.0.1:1/"], ["get", "--timeout", "0", "http://127.0.0.1:1/"],
            ["prefetch", "--timeout", "-1", "http://127.0.0.1:1/"], ["purge", "--older-than", "99999999999999999999w"],
            ["trim", "--to", "99999999999999999999TB"], ["get", "--max-size", "1e30", "http://127.0.0.1:1/"],
            ["prefetch", "--concurrency", "99999999999999999999", "http://127.0.0.1:1/"],
        ]
    )
    func optionRanges(arguments: [String]) async throws {
        let run = try await self.tool.run(arguments)
        #expect(run.status == 64)
        #expect(run.errors.contains("Error:"))
    }

    @Test("a crafted cachalot.state with counts at their largest, or absurd values, breaks no command")
    func craftedState() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "x") }
        defer { origin.stop() }
        _ = try await self.tool.run(["get", origin.url("/a").absoluteString])
        let counts = ["requests", "memoryHits", "diskHits", "misses", "bytesFromNetwork", "bytesFromCache"]
        let text = "since -9223372036854775808\nmaximumSize -5\n" + counts.map { "\($0) \(Int.max)\n" }.joined()
        try Data(text.utf8).write(to: URL(fileURLWithPath: self.tool.cache + "/cachalot.state"))
        for arguments in [
            ["get", origin.url("/a").absoluteString], ["stats"], ["stats", "--json"], ["ls"], ["clear"],
        ] {
            let run = try await self.tool.run(arguments)
            #expect(run.status == 0, "\(arguments): \(run.errors)")
        }
        let kept = "since 1800000000\n" + counts.map { "\($0) \(Int.max)\n" }.joined()
        try Data(kept.utf8).write(to: URL(fileURLWithPath: self.tool.cache + "/cachalot.state"))
        #expect(try await self.tool.run(["get", origin.url("/a").absoluteString]).status == 0)
        #expect(try await self.tool.run(["stats"]).status == 0)
        // A FIFO, which would block a reader, and a link to a file without end.
        let state = self.tool.cache + "/cachalot.state"
        try FileManager.default.removeItem(atPath: state)
        #expect(mkfifo(state, 0o600) == 0)
        #expect(try await self.tool.run(["stats"]).status == 0)
        try FileManager.default.removeItem(atPath: state)
        try FileManager.default.createSymbolicLink(atPath: state, withDestinationPath: "/dev/zero")
        #expect(try await self.tool.run(["stats"]).status == 0)
        // A run that counts replaces the link with a file of its own; /dev/zero stays a device.
        #expect(try await self.tool.run(["get", origin.url("/a").absoluteString]).status == 0)
        var status = stat()
        #expect(lstat(state, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG)
        #expect(lstat("/dev/zero", &status) == 0 && (status.st_mode & S_IFMT) == S_IFCHR)
        // A damaged date starts the counts afresh, and keeps the size limit.
        try FileManager.default.removeItem(atPath: state)
        try Data("since -1\nmaximumSize 123456789\nrequests 5\n".utf8).write(to: URL(fileURLWithPath: state))
        let report = try #require(try await self.tool.json(["stats", "--json"]) as? [String: Any])
        #expect(report["sizeLimit"] as? Int == 123_456_789)
        #expect(report["requests"] as? Int == 0)
    }

    @Test(
        "-o replaces a regular file through a name no one can guess: a link planted at the old name redirects nothing"
    )
    func plantedLink() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "body") }
        defer { origin.stop() }
        let output = self.tool.directory.path + "/out.txt"
        let victim = self.tool.directory.path + "/victim.txt"
        try Data("precious".utf8).write(to: URL(fileURLWithPath: victim))
        // The old code wrote to `<path>.cachalot-<pid>`: plant links at the names of the next
        // few hundred process ids (the kernel hands them out in order).
        let last = try Int(String(contentsOfFile: "/proc/sys/kernel/ns_last_pid", encoding: .utf8).filter(\.isNumber))
        let next = try #require(last) + 1
        for pid in next..<(next + 300) {
            try? FileManager.default.createSymbolicLink(
                atPath: "\(output).cachalot-\(pid)",
                withDestinationPath: victim
            )
        }
        let run = try await self.tool.run(["get", "-o", output, origin.url("/x").absoluteString])
        #expect(run.status == 0)
        #expect(try String(contentsOfFile: output, encoding: .utf8) == "body")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious")
    }

    @Test("-o a FIFO writes into it and leaves it a FIFO, as curl does with a device")
    func outputToFIFO() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "through the pipe") }
        defer { origin.stop() }
        let fifo = self.tool.directory.path + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let child = try self.tool.start(["get", "-o", fifo, origin.url("/x").absoluteString])
        let received = await CommandLineTool.offThePool { () -> String in
            let descriptor = open(fifo, O_RDONLY | O_CLOEXEC)
            defer { close(descriptor) }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4_096)
            while true {
                let count = read(descriptor, &buffer, buffer.count)
                if count <= 0 { break }
                bytes.append(contentsOf: buffer[0..<count])
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        let run = await CommandLineTool.finish(child)
        #expect(run.status == 0)
        #expect(received == "through the pipe")
        var status = stat()
        #expect(lstat(fifo, &status) == 0 && (status.st_mode & S_IFMT) == S_IFIFO)
    }

    @Test("-i /dev/stdin reads URLs from a pipe")
    func inputFromPipe() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "x") }
        defer { origin.stop() }
        let fifo = self.tool.directory.path + "/urls"
        #expect(mkfifo(fifo, 0o600) == 0)
        // Standard input is the FIFO, a pipe with no size, as in `cat urls | cachalot prefetch -i /dev/stdin`.
        // Opened for reading and writing here first, which never waits (on Linux), so that the
        // child's open of it for reading does not wait for a writer either.
        let writer = open(fifo, O_RDWR | O_CLOEXEC)
        #expect(writer >= 0)
        let child = try self.tool.start(["prefetch", "-i", "/dev/stdin"], input: fifo)
        let text = origin.url("/a").absoluteString + "\n" + origin.url("/b").absoluteString + "\n"
        _ = text.withCString { write(writer, $0, strlen($0)) }
        close(writer)
        let run = await CommandLineTool.finish(child)
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.errors.contains("2 URLs in"))
    }

    @Test("ls and stats refuse --max-size, and leave the cache and its kept limit as they were")
    func listingChangesNothing() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "abc") }
        defer { origin.stop() }
        _ = try await self.tool.run(["get", origin.url("/a").absoluteString])
        for command in ["ls", "stats"] {
            let run = try await self.tool.run([command, "--max-size", "500"])
            #expect(run.status == 64)
        }
        let listed = try await self.tool.run(["ls"])
        #expect(listed.output.contains(origin.url("/a").absoluteString))
        let state = try String(contentsOfFile: self.tool.cache + "/cachalot.state", encoding: .utf8)
        #expect(!state.contains("maximumSize 500"))
    }

    @Test("a redirect that is not followed is an error status with its Location; one that is, is followed")
    func redirects() async throws {
        let origin = try await TestOrigin.start { request in
            switch request.path {
            case "/ftp": .init(status: 301, fields: [("Location", "ftp://127.0.0.1/file")])
            case "/moved": .init(status: 302, fields: [("Location", "/here"), ("Cache-Control", "no-store")])
            default: .init(fields: [("Cache-Control", "max-age=60")], body: "here")
            }
        }
        defer { origin.stop() }
        let refused = try await self.tool.run(["get", origin.url("/ftp").absoluteString])
        #expect(refused.status == 2)
        #expect(refused.errors.contains("301") && refused.errors.contains("ftp://127.0.0.1/file"))
        let followed = try await self.tool.run(["get", origin.url("/moved").absoluteString])
        #expect(followed.status == 0 && followed.output == "here")
        // A 304 to the caller's own conditional request is an answer, not a redirect.
        origin.respond { _ in .init(status: 304, fields: [("ETag", "\"v1\"")]) }
        let notModified = try await self.tool.run(
            ["get", "-H", "If-None-Match: \"v1\"", origin.url("/conditional").absoluteString]
        )
        #expect(notModified.status == 0 && notModified.output.isEmpty, "\(notModified.errors)")
    }

    @Test("a body that never ends is handed on without being spooled to disk")
    func endlessBody() async throws {
        let origin = try await RawOrigin.start { _ in
            .init(
                bytes: Data("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nConnection: close\r\n\r\n".utf8),
                repeating: (Data(count: 65_536), 100_000)
            )
        }
        defer { origin.stop() }
        let child = try self.tool.start(["get", "--max-size", "20MB", origin.url("/endless").absoluteString])
        typealias Ending = (status: Int32, errors: String, signal: Int32)
        let (run, spooled) = await CommandLineTool.offThePool { () -> (Ending, Int) in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var (received, spooled) = (0, 0)
            while received < 60 << 20 {
                let count = read(child.output, &buffer, buffer.count)
                if count <= 0 { break }
                received += count
                // The most that was ever on its way to disk, looked at every megabyte.
                if received % (1 << 20) < count { spooled = max(spooled, Self.size(of: self.tool.cache + "/tmp")) }
            }
            return (child.closeOutputAndWaitForExit(), spooled)
        }
        #expect(run.status == 141)
        // At most the largest entry a 20 MB cache keeps (1 MB) was ever on its way to disk.
        #expect(spooled <= 1_000_000)
        #expect(Self.size(of: self.tool.cache + "/tmp") == 0)
    }

    @Test(
        "entries another user (root) left are skipped: get fetches again, ls lists, clear removes the rest and names them",
        .enabled(if: getuid() == 0, "changing users needs root")
    )
    func filesOfAnotherUser() async throws {
        let origin = try await TestOrigin.start { request in
            .init(fields: [("Cache-Control", "max-age=600")], body: "body of \(request.path ?? "")")
        }
        defer { origin.stop() }
        // The cache belongs to nobody, who runs a copy of the tool it can reach.
        let nobody: UInt32 = 65_534
        try #require(chmod(self.tool.directory.path, 0o755) == 0)
        let executable = self.tool.directory.path + "/cachalot"
        // A hard link where it can be: a copy is written through a descriptor that a child
        // started meanwhile by another test may inherit, and the kernel refuses to run a file
        // open for writing (ETXTBSY).
        if link(CommandLineTool.executable, executable) != 0 {
            try FileManager.default.copyItem(atPath: CommandLineTool.executable, toPath: executable)
        }
        try #require(mkdir(self.tool.cache, 0o700) == 0 && chown(self.tool.cache, nobody, nobody) == 0)
        func run(_ arguments: [String]) async throws -> CommandLineTool.Run {
            let child = try ChildProcess.start(
                "/usr/bin/setpriv",
                ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", executable, arguments[0]]
                    + ["--cache-dir", self.tool.cache] + arguments.dropFirst(),
                capturingOutput: true
            )
            return await CommandLineTool.finish(child)
        }
        // Which entry file each URL's answer went to.
        var files: [String: String] = [:]
        let paths = (0..<8).map { "/\($0)" }
        for path in paths {
            let before = Self.entryFiles(in: self.tool.cache)
            let fetched = try await run(["get", origin.url(path).absoluteString])
            #expect(fetched.status == 0, "\(fetched.errors)")
            let file = try #require(Self.entryFiles(in: self.tool.cache).subtracting(before).first)
            files[path] = file
        }
        func directory(_ path: String) -> String { ((files[path] ?? "") as NSString).deletingLastPathComponent }
        // Root takes one entry file, and the whole subdirectory of another (one apart from it).
        let taken = "/0"
        let closed = try #require(paths.dropFirst().first { directory($0) != directory(taken) })
        let others = paths.filter { directory($0) != directory(taken) && directory($0) != directory(closed) }
        try #require(!others.isEmpty)
        try #require(chown(try #require(files[taken]), 0, 0) == 0 && chown(directory(closed), 0, 0) == 0)

        let listed = try await run(["ls"])
        #expect(listed.status == 0, "\(listed.errors)")
        for path in [taken, closed] {
            let again = try await run(["get", origin.url(path).absoluteString])
            #expect(again.status == 0 && again.output == "body of \(path)", "\(again.errors)")
        }
        #expect(origin.requests.filter { $0.path == taken }.count == 2)
        let cleared = try await run(["clear"])
        #expect(cleared.status == 1)
        #expect(cleared.errors.contains("Could not remove") && cleared.errors.contains(directory(closed)))
        for path in others { #expect(!FileManager.default.fileExists(atPath: try #require(files[path]))) }
        #expect(FileManager.default.fileExists(atPath: try #require(files[closed])))
    }

    @Test("a read-only cache answers --offline, and ls lists it", .enabled(if: getuid() == 0, "mounting needs root"))
    func readOnlyCache() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], body: "kept") }
        defer { origin.stop() }
        // The cache directory is a file system of its own, made read-only once filled.
        let disk = try Tmpfs(at: self.tool.cache, size: "1m")
        defer { disk.unmount() }
        let url = origin.url("/a").absoluteString
        #expect(try await self.tool.run(["get", url]).status == 0)
        try disk.remountReadOnly()
        let offline = try await self.tool.run(["get", "--offline", url])
        #expect(offline.status == 0 && offline.output == "kept", "\(offline.errors)")
        let listed = try await self.tool.run(["ls"])
        #expect(listed.status == 0 && listed.output.contains(url), "\(listed.errors)")
        #expect(try await self.tool.run(["clear"]).status == 1)
    }

    @Test(
        "on a full disk a large answer is still delivered, and a prefetch that could not store exits 1",
        .enabled(if: getuid() == 0, "mounting a tmpfs needs root")
    )
    func fullDisk() async throws {
        let large = Data(repeating: 7, count: 9 << 20)
        let origin = try await TestOrigin.start { request in
            switch request.path {
            case "/no-store": .init(fields: [("Cache-Control", "no-store")], data: large)
            case "/large": .init(fields: [("Cache-Control", "max-age=600")], data: large)
            default: .init(fields: [("Cache-Control", "max-age=600")], body: String(repeating: "p", count: 300_000))
            }
        }
        defer { origin.stop() }
        let disk = try Tmpfs(at: self.tool.cache, size: "512k")
        defer { disk.unmount() }
        for path in ["/no-store", "/large"] {
            let output = self.tool.directory.path + "/out\(path.dropFirst())"
            let run = try await self.tool.run([
                "get", "--max-size", "1GB", "-o", output, origin.url(path).absoluteString,
            ])
            #expect(run.status == 0, "\(path): \(run.errors)")
            #expect(FileManager.default.contents(atPath: output) == large, "\(path)")
        }
        let urls = (1...4).map { origin.url("/\($0)").absoluteString }
        let prefetched = try await self.tool.run(["prefetch", "--max-size", "1GB"] + urls)
        #expect(prefetched.status == 1)
        #expect(prefetched.errors.contains("could not be stored"), "\(prefetched.errors)")
    }

    /// The entry files under `cache`.
    static func entryFiles(in cache: String) -> Set<String> {
        let entries = cache + "/entries"
        let files = (try? FileManager.default.subpathsOfDirectory(atPath: entries)) ?? []
        return Set(files.filter { $0.contains("/") }.map { "\(entries)/\($0)" })
    }

    static func size(of directory: String) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.reduce(0) { total, name in
            total + ((try? FileManager.default.attributesOfItem(atPath: "\(directory)/\(name)")[.size] as? Int) ?? 0)
        }
    }
}
