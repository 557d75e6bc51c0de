import CachalotImages
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

/// `cachalot image`, run as a child process against a real origin on 127.0.0.1.
@Suite("cachalot image, end to end", .timeLimit(.minutes(1)))
struct ImageCommandTests {
    let tool: CommandLineTool

    init() throws {
        self.tool = try CommandLineTool()
    }

    /// An origin answering a 64 × 48 PNG at /photo.png, and text elsewhere.
    func origin() async throws -> TestOrigin {
        let png = try ImageEncoder.png(
            Bitmap(width: 64, height: 48, format: .rgba8, pixels: Data((0..<64 * 48 * 4).map { UInt8($0 % 251) }))
        )
        return try await TestOrigin.start { request in
            switch request.path {
            case "/photo.png": .init(fields: [("Cache-Control", "max-age=600")], data: png)
            case "/missing.png": .init(status: 404, body: "no")
            default: .init(fields: [("Cache-Control", "max-age=600")], body: "not an image")
            }
        }
    }

    func file(_ name: String) -> String { self.tool.directory.path + "/" + name }

    @Test("a thumbnail in the format of the output's extension; a second run is the stored variant")
    func thumbnail() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        let url = origin.url("/photo.png").absoluteString
        let first = try await self.tool.run(["image", "-v", url, "--size", "32", "-o", self.file("thumb.webp")])
        #expect(first.status == 0 && first.output.isEmpty)
        #expect(first.errors.hasPrefix("made · webp · "), "\(first.errors)")
        #expect(first.errors.contains("32x24"))
        let data = try Data(contentsOf: URL(filePath: self.file("thumb.webp")))
        #expect(ImageFormat(sniffing: data) == .webp)
        #expect(try ImageDecoder().size(of: data) == (32, 24))
        let second = try await self.tool.run(["image", "-v", url, "--size", "32", "-o", self.file("again.webp")])
        #expect(second.status == 0 && second.errors.hasPrefix("variant from cache · webp · "), "\(second.errors)")
        #expect(try Data(contentsOf: URL(filePath: self.file("again.webp"))) == data)
        #expect(origin.requests.count == 1)
    }

    @Test("--format beats the extension; without either, the original's format; --fill and --crop meet the box")
    func formatsAndModes() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        let url = origin.url("/photo.png").absoluteString
        let cases: [([String], ImageFormat, (Int, Int))] = [
            (["--size", "32x16", "--fill", "--format", "avif", "-o", self.file("a.png")], .avif, (32, 24)),
            (
                ["--size", "32x16", "--crop", "--format", "jpeg", "--quality", "50", "-o", self.file("b")], .jpeg,
                (32, 16)
            ),
            (["--size", "16", "-o", self.file("c")], .png, (16, 12)),
            (["-o", self.file("d.jpg")], .jpeg, (64, 48)),
        ]
        for (arguments, format, size) in cases {
            let run = try await self.tool.run(["image", "-q", url] + arguments)
            #expect(run.status == 0 && run.errors.isEmpty, "\(arguments): \(run.errors)")
            let data = try Data(contentsOf: URL(filePath: arguments.last!))
            #expect(ImageFormat(sniffing: data) == format, "\(arguments)")
            #expect(try ImageDecoder().size(of: data) == size, "\(arguments)")
        }
    }

    @Test("an answer that is not an image ends with 5, an error status with 2, a bad box is a usage error")
    func failures() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        let text = try await self.tool.run(["image", origin.url("/text").absoluteString, "-o", self.file("x.png")])
        #expect(text.status == 5 && text.errors.contains("not PNG, JPEG, WebP, AVIF or GIF"), "\(text.errors)")
        #expect(!FileManager.default.fileExists(atPath: self.file("x.png")))
        let missing = try await self.tool.run([
            "image", origin.url("/missing.png").absoluteString, "-o", self.file("y.png"),
        ])
        #expect(missing.status == 2 && missing.errors.contains("404"))
        let box = try await self.tool.run(["image", origin.url("/photo.png").absoluteString, "--size", "0x5"])
        #expect(box.status == 64)
    }
}
