import CachalotTesting
import Foundation
import Testing

@testable import Cachalot

/// Tests with real child processes: the worker is `Tests/CachalotTestWorker`, built beside the
/// test binary.
@Suite("DiskCache with other processes")
struct DiskCacheProcessTests {
    static var worker: URL {
        #if os(Linux)
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
        let executable = URL(fileURLWithPath: CommandLine.arguments[0])
        #endif
        return executable.deletingLastPathComponent().appendingPathComponent("CachalotTestWorker")
    }

    /// Runs the worker to the end and returns its exit status and standard error.
    static func run(_ arguments: [String]) throws -> (status: Int32, errors: String) {
        let process = try Self.start(arguments)
        let errors = (process.standardError as? Pipe)?.fileHandleForReading.readDataToEndOfFile() ?? Data()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: errors, as: UTF8.self))
    }

    static func start(_ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = Self.worker
        process.arguments = arguments
        process.standardOutput = Pipe()
        process.standardError = Pipe()
        try process.run()
        return process
    }

    @Test("a writer killed with SIGKILL at random moments leaves whole entries, true totals, and the limit")
    func killedWriter() throws {
        let directory = try TemporaryDirectory()
        let limit = 8 << 20
        var random = SeededGenerator(seed: 2026)
        for round in 0..<60 {
            let writer = try Self.start(["write", directory.path, "\(round)", "\(limit)"])
            // Kill it after a random number of changes: it is then somewhere in the next one.
            let output = try #require(writer.standardOutput as? Pipe).fileHandleForReading
            var lines = 0
            let wanted = Int.random(in: 1...30, using: &random)
            while lines < wanted {
                let chunk = output.availableData
                if chunk.isEmpty { break }  // the writer ended on its own: a failure below
                lines += chunk.filter { $0 == UInt8(ascii: "\n") }.count
            }
            // Jitter, not a wait: spread the kills over every phase of a change, the short window
            // between an intent and its commit included.
            let clock = ContinuousClock()
            let deadline = clock.now.advanced(by: .microseconds(Int.random(in: 0...2_000, using: &random)))
            while clock.now < deadline {}
            kill(writer.processIdentifier, SIGKILL)
            writer.waitUntilExit()
            #expect(writer.terminationReason == .uncaughtSignal, "round \(round): the writer stopped by itself")
            let (status, errors) = try Self.run(["verify", directory.path, "\(limit)"])
            #expect(status == 0, "round \(round): \(errors)")
            if status != 0 { return }
        }
    }

    @Test("processes setting, reading and removing the same keys never read a wrong entry")
    func concurrentProcesses() throws {
        let directory = try TemporaryDirectory()
        let limit = 6 << 20
        let workers = try (0..<3).map { seed in
            try Self.start(["mix", directory.path, "\(seed + 1)", "1500", "\(limit)"])
        }
        for (number, worker) in workers.enumerated() {
            let errors = (worker.standardError as? Pipe)?.fileHandleForReading.readDataToEndOfFile() ?? Data()
            worker.waitUntilExit()
            #expect(worker.terminationStatus == 0, "worker \(number): \(String(decoding: errors, as: UTF8.self))")
        }
        let (status, errors) = try Self.run(["verify", directory.path, "\(limit)"])
        #expect(status == 0, "\(errors)")
    }
}
