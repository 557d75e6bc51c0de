@_spi(Fuzzing) import Cachalot
@_spi(Fuzzing) import CachalotImages
import Foundation
import Testing

/// Replays the image fuzzer's seeds and the inputs that once crashed it (`Fuzz/Seeds/image/`
/// and `Fuzz/Regressions/image/`) through the entry point it calls.
@Suite("Image fuzz inputs replay")
struct ImageFuzzReplayTests {
    @Test("the image decoder's inputs replay") func image() throws {
        let folder = URL(filePath: #filePath)
            .deletingLastPathComponent()  // CachalotImagesTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()
            .appending(path: "Fuzz")
        var files: [URL] = []
        for kind in ["Seeds", "Regressions"] {
            let directory = folder.appending(path: kind).appending(path: "image")
            guard FileManager.default.fileExists(atPath: directory.path) else {
                #expect(kind != "Seeds", "no seeds in \(directory.path)")
                continue
            }
            let found = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            #expect(kind != "Seeds" || !found.isEmpty, "no seeds in \(directory.path)")
            files += found.filter { !$0.lastPathComponent.hasPrefix(".") }.sorted { $0.path < $1.path }
        }
        for file in files {
            let bytes = try Data(contentsOf: file)
            bytes.withUnsafeBytes { FuzzTarget.image($0) }
        }
    }
}
