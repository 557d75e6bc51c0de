@_spi(Fuzzing) import Cachalot
@_spi(Fuzzing) import CachalotNIO
import Foundation
import Testing

/// Replays every seed and every input that once crashed a fuzzer (`Fuzz/Seeds/<target>/` and
/// `Fuzz/Regressions/<target>/`) through the entry point that the fuzzer calls, so that a bug a
/// fuzzer found stays fixed without building the fuzzers. A broken invariant is a crash.
@Suite("Fuzz inputs replay")
struct FuzzReplayTests {
    /// Each target of `Fuzz/` whose entry point is in this module or `CachalotNIO`, by its folder's name.
    static let targets: [String: @Sendable (UnsafeRawBufferPointer) -> Void] = [
        "entry-file": FuzzTarget.entryFile, "journal": FuzzTarget.journal,
        "stored-response": FuzzTarget.storedResponse, "cache-control": FuzzTarget.cacheControl,
        "http-date": FuzzTarget.httpDate, "vary": FuzzTarget.vary, "origin-response": FuzzTarget.originResponse,
    ]

    @Test("every target's seeds and regression inputs replay", arguments: targets.keys.sorted())
    func replay(target: String) throws {
        try FuzzInputs.replay(target, try #require(Self.targets[target]))
    }
}

/// The committed inputs of one fuzzer.
enum FuzzInputs {
    /// The repository's `Fuzz/` folder, found from this file's path.
    static let folder = URL(filePath: #filePath)
        .deletingLastPathComponent()  // Support
        .deletingLastPathComponent()  // CachalotTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()
        .appending(path: "Fuzz")

    /// Runs `entry` on every file in `Seeds/<target>/` and `Regressions/<target>/`; records an
    /// issue if there are no seeds, so that a moved or emptied folder cannot pass silently.
    static func replay(_ target: String, _ entry: (UnsafeRawBufferPointer) -> Void) throws {
        let seeds = try Self.files(in: "Seeds", target)
        #expect(!seeds.isEmpty, "no seeds in \(Self.folder.path)/Seeds/\(target)")
        for file in try seeds + Self.files(in: "Regressions", target) {
            let bytes = try Data(contentsOf: file)
            bytes.withUnsafeBytes { entry($0) }
        }
    }

    /// The files in `Fuzz/<kind>/<target>/`, none if it does not exist.
    private static func files(in kind: String, _ target: String) throws -> [URL] {
        let directory = Self.folder.appending(path: kind).appending(path: target)
        guard FileManager.default.fileExists(atPath: directory.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { !$0.lastPathComponent.hasPrefix(".") }
            .sorted { $0.path < $1.path }
    }
}
