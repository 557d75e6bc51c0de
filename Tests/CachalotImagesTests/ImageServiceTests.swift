import Cachalot
import CachalotAsyncHTTPClient
import CachalotImages
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

/// What an app's image service asks of the pipeline: answers from memory only, prefetching,
/// encoded variants, and the disk's upkeep; against a real origin on 127.0.0.1.
@Suite("Image service API", .timeLimit(.minutes(1)))
struct ImageServiceTests {
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func pipeline(
        _ configuration: ImagePipeline.Configuration = .init(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> (ImagePipeline, originals: DiskCache, variants: DiskCache) {
        let variants = try DiskCache(directory: self.directory.url.appending(path: "variants"))
        let originals = try DiskCache(directory: self.directory.url.appending(path: "originals"))
        let loader = try ResourceLoader(transport: AsyncHTTPClientTransport(), disk: originals, now: now)
        let pipeline = try ImagePipeline(loader: loader, variants: variants, configuration: configuration, now: now)
        return (pipeline, originals, variants)
    }

    /// An origin answering a 64 × 48 JPEG, fresh for 10 minutes, at any path.
    func origin(_ hold: Gate? = nil, arrived: Countdown? = nil) async throws -> TestOrigin {
        let jpeg = try ImageEncoder.jpeg(Images.photo(width: 64, height: 48))
        return try await TestOrigin.start { _ in
            arrived?.increment()
            await hold?.wait()
            return .init(fields: [("Cache-Control", "max-age=600")], data: jpeg)
        }
    }

    @Test("cachedImage answers from memory only: nil until an image was made, never a load")
    func cachedImage() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        let (pipeline, _, _) = try self.pipeline()
        let url = origin.url("/a.jpg")
        let thumbnail = Thumbnail(maximumPixelSize: 16)
        #expect(pipeline.cachedImage(for: url, processors: [thumbnail]) == nil)
        #expect(origin.requests.isEmpty)
        let made = try await pipeline.image(for: url, processors: [thumbnail])
        #expect(pipeline.cachedImage(for: url, processors: [thumbnail]) == made)
        // The original was not asked for as such: memory has no bitmap of it.
        #expect(pipeline.cachedImage(for: url) == nil)
        #expect(origin.requests.count == 1)
        await pipeline.waitForBackgroundWork()
    }

    @Test("a prefetch decodes and processes its images into memory, or only loads their bytes")
    func prefetch() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        let (pipeline, originals, _) = try self.pipeline()
        let thumbnail = Thumbnail(maximumPixelSize: 16)
        let urls = (0..<5).map { origin.url("/\($0).jpg") }
        let prefetch = pipeline.prefetch(urls + [urls[0]], processors: [thumbnail])
        #expect(await prefetch.wait() == 5)
        for url in urls { #expect(pipeline.cachedImage(for: url, processors: [thumbnail])?.width == 16) }
        #expect(origin.requests.count == 5)

        let bytesOnly = origin.url("/bytes.jpg")
        #expect(await pipeline.prefetch([bytesOnly], decoding: false).wait() == 1)
        #expect(pipeline.cachedImage(for: bytesOnly) == nil)
        await pipeline.waitForBackgroundWork()
        #expect(try originals.contains(#require(CacheKey.url(of: bytesOnly))))
        #expect(origin.requests.count == 6)
    }

    @Test("a cancelled prefetch stops: its image is neither decoded nor kept")
    func cancelledPrefetch() async throws {
        let hold = Gate()
        let arrived = Countdown()
        let origin = try await self.origin(hold, arrived: arrived)
        defer { origin.stop() }
        let (pipeline, _, _) = try self.pipeline()
        let url = origin.url("/held.jpg")
        let prefetch = pipeline.prefetch([url], processors: [Thumbnail(maximumPixelSize: 16)])
        await arrived.wait(for: 1)
        prefetch.cancel()
        #expect(await prefetch.wait() == 0)
        hold.open()
        await pipeline.waitForBackgroundWork()
        #expect(pipeline.cachedImage(for: url, processors: [Thumbnail(maximumPixelSize: 16)]) == nil)
        #expect(pipeline.memory.count == 0)
    }

    @Test("encoded variants: made once in the format asked for, then stored; fresh as long as their original")
    func encodedImages() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        let clock = ManualWallClock()
        let (pipeline, _, variants) = try self.pipeline(now: { clock.now })
        let url = origin.url("/a.jpg")
        let thumbnail = Thumbnail(maximumPixelSize: 32)
        let made = try await pipeline.encodedImage(for: url, processors: [thumbnail], encoding: .webp())
        #expect(made.source == .made && made.format == .webp && ImageFormat(sniffing: made.data) == .webp)
        #expect(made.expires == clock.now.addingTimeInterval(600))
        #expect(try ImageDecoder().decode(made.data).width == 32)
        await pipeline.waitForBackgroundWork()
        let stored = try await pipeline.encodedImage(for: url, processors: [thumbnail], encoding: .webp())
        #expect(stored.source == .stored && stored.data == made.data && stored.expires == made.expires)
        // Another format, another variant; neither kept a bitmap in memory.
        let avif = try await pipeline.encodedImage(for: url, processors: [thumbnail], encoding: .avif())
        #expect(avif.source == .made && ImageFormat(sniffing: avif.data) == .avif)
        #expect(pipeline.memory.count == 0)
        await pipeline.waitForBackgroundWork()
        #expect(try variants.count == 2)
        #expect(origin.requests.count == 1)
        // Once the original is stale, it is loaded again; unchanged, the variant stands.
        clock.advance(by: 601)
        let again = try await pipeline.encodedImage(for: url, processors: [thumbnail], encoding: .webp())
        #expect(again.source == .revalidated && again.data == made.data)
        #expect(again.expires == clock.now.addingTimeInterval(600))
        #expect(origin.requests.count == 2)
        await pipeline.waitForBackgroundWork()
    }

    @Test("an animation's frames and durations come through the loader, its original cached like any")
    func animation() async throws {
        let gif = try Images.fixture("animated.gif")
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], data: gif) }
        defer { origin.stop() }
        let (pipeline, _, _) = try self.pipeline(.init(decoder: ImageDecoder(maximumPixelCount: 700)))
        let url = origin.url("/a.gif")
        // Four frames of 4 × 4, each counting 256 pixels: past a limit of 700 together.
        await #expect { _ = try await pipeline.animation(for: url) } throws: { ($0 as? ImageError)?.code == .tooLarge }
        await pipeline.waitForBackgroundWork()
        let (roomy, _, _) = try self.pipeline()
        let animation = try await roomy.animation(for: url)
        #expect(animation.frames.count == 4 && animation.duration == .milliseconds(650))
        #expect(origin.requests.count == 1)
        await roomy.waitForBackgroundWork()
    }

    @Test(
        "an animated original gives an animated WebP, every frame resized, when the encoding animates; the first frame otherwise"
    )
    func animatedVariant() async throws {
        let gif = try Images.fixture("animated.gif")
        let jpeg = try ImageEncoder.jpeg(Images.photo(width: 64, height: 48))
        let origin = try await TestOrigin.start { request in
            .init(fields: [("Cache-Control", "max-age=600")], data: request.path == "/a.gif" ? gif : jpeg)
        }
        defer { origin.stop() }
        let (pipeline, _, _) = try self.pipeline()
        let url = origin.url("/a.gif")
        let thumbnail = Thumbnail(maximumPixelSize: 2)
        let animated = try await pipeline.encodedImage(
            for: url,
            processors: [thumbnail],
            encoding: .webp(animates: true)
        )
        let frames = try ImageDecoder().decodeAnimation(animated.data)
        #expect(frames.frames.map(\.duration) == [50, 100, 200, 300].map { .milliseconds($0) })
        #expect(frames.loopCount == 0)
        #expect(frames.frames.allSatisfy { $0.bitmap.width == 2 && $0.bitmap.height == 2 })
        for encoding in [ImageEncoding.webp(), .png] {
            let still = try await pipeline.encodedImage(for: url, processors: [thumbnail], encoding: encoding)
            #expect(try ImageDecoder().frameCount(of: still.data) == 1, "\(encoding)")
        }
        // The best of AVIF and an animated WebP: the WebP for the animation, AVIF for a photo.
        let best = ImageEncodingChoice.best(of: [.avif(), .webp(animates: true)], otherwise: .always(.png))
        #expect(best.name == "best(avif:60|webp:80,animated)")
        let chosen = try await pipeline.encodedImage(for: url, processors: [thumbnail], choosing: best)
        #expect(chosen.format == .webp && chosen.data == animated.data)
        let photo = try await pipeline.encodedImage(for: origin.url("/a.jpg"), processors: [thumbnail], choosing: best)
        #expect(photo.format == .avif)
        #expect(origin.requests.count == 2)
        await pipeline.waitForBackgroundWork()
        // Four frames of 4 × 4, each counting 256 pixels: past a limit of 700 together, so the
        // variant is the first frame, which is within it.
        let (strict, _, _) = try self.pipeline(.init(decoder: ImageDecoder(maximumPixelCount: 700)))
        let first = try await strict.encodedImage(
            for: url,
            processors: [thumbnail],
            encoding: .webp(quality: 79, animates: true)
        )
        #expect(try ImageDecoder().frameCount(of: first.data) == 1)
        await strict.waitForBackgroundWork()
    }

    @Test("variants are kept in the encoding configured, such as WebP")
    func variantEncoding() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        let (pipeline, _, variants) = try self.pipeline(.init(variantEncoding: .webp()))
        let url = origin.url("/a.jpg")
        let thumbnail = Thumbnail(maximumPixelSize: 32)
        _ = try await pipeline.image(for: url, processors: [thumbnail])
        await pipeline.waitForBackgroundWork()
        let stored = try #require(try variants.data(forKey: ImagePipeline.key(for: url, processors: [thumbnail])))
        #expect(ImageFormat(sniffing: stored) == .webp)
    }

    @Test("an original past the source size limit is refused before it is decoded")
    func sourceLimit() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        let (pipeline, _, _) = try self.pipeline(.init(maximumSourceSize: 100))
        await #expect { _ = try await pipeline.image(for: origin.url("/a.jpg")) } throws: {
            ($0 as? ImageError)?.code == .tooLarge
        }
        await #expect { _ = try await pipeline.encodedImage(for: origin.url("/a.jpg"), encoding: .png) } throws: {
            ($0 as? ImageError)?.code == .tooLarge
        }
        await pipeline.waitForBackgroundWork()
    }

    @Test("disk size counts originals and variants; purge removes what is older than a date; clearAll removes all")
    func upkeep() async throws {
        let origin = try await self.origin()
        defer { origin.stop() }
        let (pipeline, originals, variants) = try self.pipeline()
        let thumbnail = Thumbnail(maximumPixelSize: 16)
        let urls = (0..<3).map { origin.url("/\($0).jpg") }
        #expect(await pipeline.prefetch(urls, processors: [thumbnail]).wait() == 3)
        await pipeline.waitForBackgroundWork()
        let size = try #require(try pipeline.diskSize)
        let parts = try originals.totalSize + variants.totalSize
        #expect(size > 0 && size == parts)
        #expect(try variants.count == 3 && originals.count == 3)

        #expect(try await pipeline.purge(olderThan: .distantPast) == 0)
        // Three variants, and three originals in the loader's memory and on its disk.
        #expect(try await pipeline.purge(olderThan: Date().addingTimeInterval(60)) == 9)
        #expect(try pipeline.diskSize == 0)
        // Memory keeps its bitmaps until clearAll.
        #expect(pipeline.cachedImage(for: urls[0], processors: [thumbnail]) != nil)
        try await pipeline.clearAll()
        #expect(pipeline.cachedImage(for: urls[0], processors: [thumbnail]) == nil)
        _ = try await pipeline.image(for: urls[0], processors: [thumbnail])
        #expect(origin.requests.count == 4)
        await pipeline.waitForBackgroundWork()
        #expect(try pipeline.diskSize ?? 0 > 0)
        try await pipeline.clearAll()
        #expect(try pipeline.diskSize == 0 && pipeline.memory.count == 0)
    }
}
