import Foundation
import Testing

@Suite("The release: version and changelog")
struct ReleaseTests {
    /// The repository's top folder, found from this file's path.
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("cachalot --version prints the version that CHANGELOG.md's newest entry names")
    func versionMatchesChangelog() async throws {
        let changelog = try String(contentsOf: Self.repository.appending(path: "CHANGELOG.md"), encoding: .utf8)
        let entry = try #require(changelog.split(separator: "\n").first { $0.hasPrefix("## ") })
        let named = try #require(entry.dropFirst(3).split(separator: " ").first.map(String.init))
        let child = try ChildProcess.start(CommandLineTool.executable, ["--version"], capturingOutput: true)
        let run = await CommandLineTool.finish(child)
        #expect(run.status == 0)
        #expect(run.output == named + "\n", "\(run.output) \(run.errors)")
    }
}
