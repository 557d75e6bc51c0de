import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

@Suite("cachalot with a directory planted where an entry file belongs", .timeLimit(.minutes(1)))
struct PlantedDirectoryTests {
    @Test("get, ls, stats, trim and clear go on; the directory is removed without following its links")
    func commandsGoOn() async throws {
        let tool = try CommandLineTool()
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], body: "hello")
        }
        defer { origin.stop() }
        let url = origin.url("/a").absoluteString
        #expect(try await tool.run(["get", url]).status == 0)
        let entry = try #require(HardeningTests.entryFiles(in: tool.cache).first)
        // A non-empty directory in the entry file's place, holding a link to a file outside.
        let outside = tool.directory.path + "/outside.txt"
        #expect(FileManager.default.createFile(atPath: outside, contents: Data("keep".utf8)))
        try FileManager.default.removeItem(atPath: entry)
        try FileManager.default.createDirectory(atPath: entry + "/deeper", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: entry + "/deeper/file", contents: Data("x".utf8)))
        try FileManager.default.createSymbolicLink(atPath: entry + "/link", withDestinationPath: outside)

        let read = try await tool.run(["get", url])
        #expect(read.status == 0, "\(read.errors)")
        #expect(read.output == "hello")
        for command in [["get", url], ["ls"], ["stats"], ["trim", "--to", "1KB"], ["clear"]] {
            let run = try await tool.run(command)
            #expect(run.status == 0, "\(command): \(run.errors)")
        }
        #expect(HardeningTests.entryFiles(in: tool.cache).isEmpty)
        #expect(try String(contentsOfFile: outside, encoding: .utf8) == "keep")
    }
}
