import CachalotTesting
import Foundation
import Testing

@testable import Cachalot

/// Tests with real child processes: the worker is `Tests/CachalotTestWorker`, built beside the
/// test binary.
@Suite("DiskCache with other processes")
struct DiskCacheProcessTests {
    static var worker: String {
        #if os(Linux)
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
        let executable = URL(fileURLWithPath: CommandLine.arguments[0])
        #endif
        return executable.deletingLastPathComponent().appendingPathComponent("CachalotTestWorker").path
    }

    /// Runs the worker to the end and returns its exit status and standard error. Waiting for a
    /// child blocks a thread, so it waits off Swift's cooperative pool, which other tests' origins
    /// need (two tests blocking both of its threads here once starved them past their timeouts).
    static func run(_ arguments: [String]) async throws -> (status: Int32, errors: String) {
        let child = try ChildProcess.start(Self.worker, arguments)
        return await CommandLineTool.offThePool { child.waitForExit() }
    }

    @Test("a writer killed with SIGKILL at random moments leaves whole entries, true totals, and the limit")
    func killedWriter() async throws {
        let directory = try TemporaryDirectory()
        let limit = 8 << 20
        var random = SeededGenerator(seed: 2026)
        for round in 0..<60 {
            let writer = try ChildProcess.start(
                Self.worker,
                ["write", directory.path, "\(round)", "\(limit)"],
                capturingOutput: true
            )
            // Kill it after a random number of changes: it is then somewhere in the next one.
            let wanted = Int.random(in: 1...30, using: &random)
            let lines = await CommandLineTool.offThePool { writer.waitForLines(wanted) }
            // Jitter, not a wait: spread the kills over every phase of a change, the short window
            // between an intent and its commit included.
            let clock = ContinuousClock()
            let deadline = clock.now.advanced(by: .microseconds(Int.random(in: 0...2_000, using: &random)))
            while clock.now < deadline {}
            writer.send(SIGKILL)
            let ending = await CommandLineTool.offThePool { writer.waitForExit() }
            #expect(
                lines >= wanted && ending.status == 128 + SIGKILL,
                "round \(round): the writer stopped by itself: \(ending.errors)"
            )
            let (status, errors) = try await Self.run(["verify", directory.path, "\(limit)"])
            #expect(status == 0, "round \(round): \(errors)")
            if status != 0 { return }
        }
    }

    @Test("processes setting, reading and removing the same keys never read a wrong entry")
    func concurrentProcesses() async throws {
        let directory = try TemporaryDirectory()
        let limit = 6 << 20
        let workers = try (0..<3).map { seed in
            try ChildProcess.start(Self.worker, ["mix", directory.path, "\(seed + 1)", "1500", "\(limit)"])
        }
        for (number, worker) in workers.enumerated() {
            let (status, errors) = await CommandLineTool.offThePool { worker.waitForExit() }
            #expect(status == 0, "worker \(number): \(errors)")
        }
        let (status, errors) = try await Self.run(["verify", directory.path, "\(limit)"])
        #expect(status == 0, "\(errors)")
    }
}
