import ArgumentParser
import Cachalot
import CachalotImages
import CachalotPostgres
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `cachalot image`: a thumbnail or a resize of an image URL, through the cache.
struct ImageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image",
        abstract: "Fetch an image through the cache and write it resized, in the format asked for.",
        discussion: """
            Examples:
              cachalot image https://example.com/photo.jpg --size 256 -o thumb.webp
              cachalot image https://example.com/photo.jpg --size 640x480 --fill --format avif > out.avif

            The original is loaded through the cache as with `get`, and the variant made of it is \
            kept in the same cache directory, fresh as long as the original is: a second run is \
            answered from the variant, without decoding. It reads PNG, JPEG, WebP, AVIF and GIF, \
            told by their bytes, and writes JPEG, PNG, WebP or AVIF: --format, else the output \
            file's extension, else the original's format (PNG for a GIF). --format auto writes an \
            animated WebP for an animated GIF or WebP and AVIF for any other. WebP keeps an \
            animation, every frame resized; the other formats take its first frame.

            An answer that is not an image it can decode ends it with status 5.
            """
    )

    @OptionGroup var options: GlobalOptions
    @OptionGroup var storage: StorageOptions
    @OptionGroup var shared: SharedOptions

    @Argument(help: "The http or https URL of the image.")
    var url: String

    @Option(help: "The box to resize into: N (a square) or WxH. Without it, the image keeps its size.")
    var size: Box?

    @Flag(help: "How the image meets the box (default: fit, never enlarged).")
    var mode: Mode = .fit

    @Option(help: "The output's format: jpeg, png, webp, avif, or auto (animated WebP or AVIF).")
    var format: OutputFormat?

    @Option(help: "The output's quality, 0 to 100 (default: jpeg 90, webp 80, avif 60).")
    var quality: Int?

    @Option(name: .shortAndLong, help: "Write the image to this file instead of standard output.")
    var output: String?

    @Flag(name: .shortAndLong, help: "Say where the variant came from, with its format, size and time.")
    var verbose = false

    struct Box: ExpressibleByArgument {
        let width: Int
        let height: Int

        init?(argument: String) {
            let parts = argument.split(separator: "x", omittingEmptySubsequences: false).map { Int($0) }
            guard (1...2).contains(parts.count), let width = parts[0], let height = parts.last ?? nil,
                (1...65_535).contains(width), (1...65_535).contains(height)
            else { return nil }
            (self.width, self.height) = (width, height)
        }
    }

    enum Mode: String, EnumerableFlag {
        case fit, fill, crop

        var resize: Resize.Mode {
            switch self {
            case .fit: .aspectFit
            case .fill: .aspectFill
            case .crop: .crop
            }
        }
    }

    enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
        case jpeg, png, webp, avif, auto

        init?(fileExtension: String) {
            let name = fileExtension.lowercased() == "jpg" ? "jpeg" : fileExtension.lowercased()
            guard name != "auto" else { return nil }
            self.init(rawValue: name)
        }

        /// `nil` for `auto`.
        var format: ImageFormat? { ImageFormat(rawValue: self.rawValue) }
    }

    func validate() throws {
        guard HTTPURL.parse(self.url) != nil else {
            throw ValidationError("'\(self.url)' is not an http or https URL, such as https://example.com/a.png.")
        }
        if let quality = self.quality, !(0...100).contains(quality) {
            throw ValidationError("--quality must be from 0 to 100.")
        }
    }

    func run() async throws {
        try await Interruption.cancelling(quiet: self.options.quiet) {
            try await Failure.reporting(quiet: self.options.quiet) {
                try await self.shared.withTier(quiet: self.options.quiet) { shared in
                    try await self.make(shared: shared)
                }
            }
        }
    }

    private func make(shared: PostgresCache?) async throws {
        let start = ContinuousClock.now
        guard let url = HTTPURL.parse(self.url) else { throw ValidationError("'\(self.url)' is not an http URL.") }
        let disk = try self.options.openCache()
        let loader = try self.options.makeLoader(
            disk: disk,
            shared: shared,
            policy: .useProtocolCachePolicy,
            timeout: 30,
            storage: self.storage
        )
        // Variants live in the same directory: its size limit, purge, trim and clear cover them.
        let pipeline = try ImagePipeline(loader: loader, variants: disk)
        let processors: [any ImageProcessing] =
            self.size.map {
                [Resize(width: $0.width, height: $0.height, mode: self.mode.resize)]
            } ?? []
        let made: Result<EncodedImage, any Error>
        do {
            made = .success(
                try await pipeline.encodedImage(
                    for: url,
                    processors: processors,
                    choosing: self.encodingChoice
                )
            )
        } catch {
            made = .failure(error)
        }
        await pipeline.waitForBackgroundWork()
        self.options.warnUnstored(await self.options.finish(loader, disk: disk), in: disk)
        let image: EncodedImage
        do {
            image = try made.get()
        } catch is CancellationError {
            throw CancellationError()
        } catch let failure as Failure {
            throw failure
        } catch let error as ImageError {
            if case .status(let status) = error.code {
                throw Failure(.httpError, "the server answered \(status) for \(self.url), not an image")
            }
            throw Failure(.notAnImage, "\(self.url): \(error.message)")
        } catch {
            throw Failure(loading: self.url, error)
        }
        do {
            let file = try OutputFile(path: self.output)
            try file.write(image.data)
            try file.finish()
        } catch let error as OutputFile.WriteError {
            throw Failure(.cacheUnusable, "cannot write \(error)")
        }
        self.report(image, after: ContinuousClock.now - start)
    }

    /// The encoding asked for: --format, else the output file's extension, else the original's
    /// format (PNG for a GIF), read from its bytes once the pipeline has loaded it. `auto` is the
    /// best of AVIF and WebP, as the image endpoint chooses for a client that takes both.
    private var encodingChoice: ImageEncodingChoice {
        let extensionFormat = self.output.flatMap { path in
            path.contains(".") ? OutputFormat(fileExtension: String(path.split(separator: ".").last ?? "")) : nil
        }
        let quality = self.quality
        let name = "original(\(quality.map(String.init) ?? "default"),animated)"
        let original = ImageEncodingChoice(name: name) { original in
            Self.encoding(original.format.flatMap { $0 == .gif ? nil : $0 } ?? .png, quality: quality)
        }
        switch self.format ?? extensionFormat {
        case .auto?:
            return .best(of: [.avif, .webp].map { Self.encoding($0, quality: quality) }, otherwise: original)
        case let asked?:
            return .always(Self.encoding(asked.format ?? .png, quality: quality))
        case nil:
            return original
        }
    }

    /// The encoding of `format` at `quality`, or at the format's default; WebP animates.
    private static func encoding(_ format: ImageFormat, quality: Int?) -> ImageEncoding {
        switch format {
        case .jpeg: return quality.map { .jpeg(quality: $0) } ?? .jpeg()
        case .webp: return .webp(quality: quality ?? 80, animates: true)
        case .avif: return quality.map { .avif(quality: $0) } ?? .avif()
        case .png, .gif: return .png
        }
    }

    private func report(_ image: EncodedImage, after elapsed: Duration) {
        guard !self.options.quiet, self.verbose || isatty(2) != 0 else { return }
        let source = image.source == .stored ? "variant from cache" : "made"
        var line = "\(source) · \(image.format.rawValue) · \(ByteCount.format(image.data.count))"
        if let size = try? ImageDecoder().size(of: image.data) { line += " · \(size.width)x\(size.height)" }
        if let frames = try? ImageDecoder().frameCount(of: image.data), frames > 1 { line += " · \(frames) frames" }
        line += " · \(formatDuration(elapsed))"
        GlobalOptions.say(line)
    }
}
