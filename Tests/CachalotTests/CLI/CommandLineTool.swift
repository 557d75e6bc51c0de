import CachalotTesting
import Dispatch
import Foundation
import Testing

/// The built `cachalot`, run as a child process with a cache directory of its own.
struct CommandLineTool {
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    /// The cache directory every run is given.
    var cache: String { self.directory.path + "/cache" }

    /// What one run did.
    struct Run {
        var status: Int32
        var output: String
        var errors: String
    }

    static var executable: String {
        #if os(Linux)
        let tests = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
        let tests = URL(fileURLWithPath: CommandLine.arguments[0])
        #endif
        return tests.deletingLastPathComponent().appendingPathComponent("cachalot").path
    }

    /// Starts `cachalot` with the cache directory after the command's name.
    func start(
        _ arguments: [String],
        capturingOutput: Bool = true,
        input: String? = nil,
        errorsToTerminal: Bool = false,
        environment: [String: String] = [:]
    ) throws -> ChildProcess {
        try ChildProcess.start(
            Self.executable,
            [arguments[0], "--cache-dir", self.cache] + arguments.dropFirst(),
            capturingOutput: capturingOutput,
            input: input,
            errorsToTerminal: errorsToTerminal,
            environment: environment
        )
    }

    /// Runs `cachalot` to its end.
    func run(
        _ arguments: [String],
        input: String? = nil,
        errorsToTerminal: Bool = false,
        environment: [String: String] = [:]
    ) async throws -> Run {
        let child = try self.start(
            arguments,
            input: input,
            errorsToTerminal: errorsToTerminal,
            environment: environment
        )
        return await Self.finish(child)
    }

    /// Reads a started child's output and waits for its end.
    static func finish(_ child: ChildProcess) async -> Run {
        await Self.offThePool {
            let output = child.readOutput()
            let (status, errors) = child.waitForExit()
            return Run(status: status, output: String(decoding: output, as: UTF8.self), errors: errors)
        }
    }

    /// Runs `cachalot` and parses its standard output as JSON.
    func json(_ arguments: [String]) async throws -> Any {
        let run = try await self.run(arguments)
        guard run.status == 0 else { throw Failed(run: run) }
        return try JSONSerialization.jsonObject(with: Data(run.output.utf8))
    }

    /// The files in the cache's `tmp/`, and the URLs `cachalot ls` lists: what a run left.
    func leftovers() async throws -> (temporary: [String], listed: [String]) {
        let temporary = try FileManager.default.contentsOfDirectory(atPath: self.cache + "/tmp")
        let listed = try #require(try await self.json(["ls", "--json"]) as? [[String: Any]])
        return (temporary, listed.compactMap { $0["url"] as? String })
    }

    struct Failed: Error {
        let run: Run
    }

    /// Runs blocking work on a Dispatch thread: blocking the concurrency pool's few threads would
    /// starve the test origin, which answers on them.
    static func offThePool<Result: Sendable>(_ work: @escaping @Sendable () -> Result) async -> Result {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: work()) }
        }
    }
}
