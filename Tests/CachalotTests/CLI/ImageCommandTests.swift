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

    /// An origin answering a 64 × 48 PNG at /photo.png, an animated WebP of 2 frames at
    /// /animated.webp, and text elsewhere.
    func origin() async throws -> TestOrigin {
        let bitmap = { (offset: Int) in
            Bitmap(
                width: 64,
                height: 48,
                format: .rgba8,
                pixels: Data((0..<64 * 48 * 4).map { UInt8(($0 + offset) % 251) })
            )
        }
        let png = try ImageEncoder.png(bitmap(0))
        let animated = try ImageEncoder.webp(
            Animation(frames: [0, 60].map { .init(bitmap: bitmap($0), duration: .milliseconds(100)) }, loopCount: 0)
        )
        return try await TestOrigin.start { request in
            switch request.path {
            case "/photo.png": .init(fields: [("Cache-Control", "max-age=600")], data: png)
            case "/animated.webp": .init(fields: [("Cache-Control", "max-age=600")], data: animated)
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

    @Test("--format auto: AVIF for a still, an animated WebP for an animation; the report says which")
    func automaticFormat() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        for (path, format, report) in [
            ("/photo.png", ImageFormat.avif, "made · avif · "), ("/animated.webp", .webp, "made · webp · "),
        ] {
            let output = self.file("auto" + path.replacingOccurrences(of: "/", with: "-"))
            let run = try await self.tool.run([
                "image", "-v", origin.url(path).absoluteString, "--size", "16", "--format", "auto", "-o", output,
            ])
            #expect(run.status == 0 && run.errors.hasPrefix(report), "\(path): \(run.errors)")
            let data = try Data(contentsOf: URL(filePath: output))
            #expect(ImageFormat(sniffing: data) == format, "\(path)")
            #expect(try ImageDecoder().size(of: data) == (16, 12))
            let frames = try ImageDecoder().frameCount(of: data)
            #expect(frames == (format == .webp ? 2 : 1))
            #expect(run.errors.contains(" · 2 frames · ") == (frames == 2), "\(run.errors)")
        }
        // Without --format, an animated WebP stays animated as WebP (by the extension, or as the
        // original's format); as PNG, it is its first frame.
        let url = origin.url("/animated.webp").absoluteString
        for (output, frames) in [("kept.webp", 2), ("original", 2), ("first.png", 1)] {
            let run = try await self.tool.run(["image", "-q", url, "--size", "16", "-o", self.file(output)])
            #expect(run.status == 0, "\(output): \(run.errors)")
            let data = try Data(contentsOf: URL(filePath: self.file(output)))
            #expect(try ImageDecoder().frameCount(of: data) == frames, "\(output)")
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
