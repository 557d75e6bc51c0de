import Cachalot
import CachalotAsyncHTTPClient
import CachalotImages
import CachalotNIO
import CachalotTestOrigin
import CachalotTesting
import Dispatch
import Foundation
import HTTPTypes
import Testing

/// The image pipeline against a real origin on 127.0.0.1. Each test waits for its pipelines'
/// background work before it ends: a disk write that outlived the test would make its removed
/// directory again.
@Suite("Image pipeline", .timeLimit(.minutes(1)))
struct PipelineTests {
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    /// A processor that counts its runs, around a thumbnail.
    struct Counted: ImageProcessing {
        let runs: Countdown
        var identifier: String { "counted" }

        func process(_ bitmap: Bitmap) throws -> Bitmap {
            self.runs.increment()
            return try Thumbnail(maximumPixelSize: 32).process(bitmap)
        }
    }

    func pipeline(
        memoryCostLimit: Int? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws -> (ImagePipeline, DiskCache) {
        let variants = try DiskCache(directory: self.directory.url.appending(path: "variants"))
        let loader = try ResourceLoader(
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: self.directory.url.appending(path: "originals"))
        )
        let pipeline = try ImagePipeline(
            loader: loader,
            variants: variants,
            configuration: .init(memoryCostLimit: memoryCostLimit),
            now: now
        )
        return (pipeline, variants)
    }

    @Test("a thumbnail is made once: then from memory, and for a new pipeline from the variant on disk")
    func variantsAcrossTiers() async throws {
        let jpeg = try ImageEncoder.jpeg(Images.photo(width: 640, height: 480))
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], data: jpeg) }
        defer { origin.stop() }
        let url = origin.url("/photo.jpg")
        let thumbnail = Thumbnail(maximumPixelSize: 64)
        let (first, variants) = try self.pipeline()
        let made = try await first.image(for: url, processors: [thumbnail])
        #expect(made.width == 64 && made.height == 48)
        #expect(try await first.image(for: url, processors: [thumbnail]) == made)
        #expect(first.memory.statistics.hits == 1)
        #expect(first.memory.totalCost == made.cost)

        await first.waitForBackgroundWork()
        #expect(try variants.contains(ImagePipeline.key(for: url, processors: [thumbnail])))
        // So is the original, on the loader's disk.
        let originals = try DiskCache(directory: self.directory.url.appending(path: "originals"))
        #expect(try originals.contains(#require(CacheKey.url(of: url))))
        let (second, _) = try self.pipeline()
        let again = try await second.image(for: url, processors: [thumbnail])
        #expect(again.width == 64 && again.height == 48)
        #expect(origin.requests.count == 1)
        // The original, unprocessed, is another key: its bytes come from the loader's disk.
        let original = try await second.image(for: url)
        #expect(original.width == 640 && second.memory.totalCost == again.cost + original.cost)
        #expect(origin.requests.count == 1)
        await second.waitForBackgroundWork()
    }

    @Test("the memory tier holds bitmaps by bytesPerRow × height, within its limit")
    func memoryCost() async throws {
        let png = try ImageEncoder.png(Images.photo(width: 100, height: 50))
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], data: png) }
        defer { origin.stop() }
        // Room for ten 100 × 50 RGBA bitmaps of 20,000 bytes (an entry may take a tenth).
        let (pipeline, _) = try self.pipeline(memoryCostLimit: 200_000)
        let first = try await pipeline.image(for: origin.url("/0.png"))
        #expect(first.cost == 100 * 4 * 50 && pipeline.memory.totalCost == 20_000)
        for index in 1...11 { _ = try await pipeline.image(for: origin.url("/\(index).png")) }
        #expect(pipeline.memory.totalCost <= 200_000 && pipeline.memory.count <= 10)
        #expect(pipeline.memory.totalCost == pipeline.memory.count * 20_000)
        await pipeline.waitForBackgroundWork()
    }

    @Test("identical requests in flight share one load and one processing")
    func coalescing() async throws {
        let png = try ImageEncoder.png(Images.photo(width: 200, height: 100))
        let release = Gate()
        let arrived = Countdown()
        let origin = try await TestOrigin.start { _ in
            arrived.increment()
            await release.wait()
            return .init(fields: [("Cache-Control", "max-age=600")], data: png)
        }
        defer { origin.stop() }
        let runs = Countdown()
        let (pipeline, _) = try self.pipeline()
        let url = origin.url("/a.png")
        let results = try await withThrowingTaskGroup(of: Bitmap.self) { group in
            for _ in 0..<8 { group.addTask { try await pipeline.image(for: url, processors: [Counted(runs: runs)]) } }
            // The origin holds its answer until asked: callers that come meanwhile join the
            // flight, later ones find the bitmap in memory.
            await arrived.wait(for: 1)
            release.open()
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 8 && Set(results.map(\.width)) == [32])
        #expect(runs.count == 1)
        #expect(origin.requests.count == 1)
        await pipeline.waitForBackgroundWork()
    }

    /// A processor that says it started, then holds its thread until released.
    struct Blocking: ImageProcessing {
        let started: Countdown
        let release: DispatchSemaphore
        var identifier: String { "blocking" }

        func process(_ bitmap: Bitmap) throws -> Bitmap {
            self.started.increment()
            self.release.wait()
            return bitmap
        }
    }

    @Test("a request whose caller went stops before its decoding: its processor never runs")
    func cancellationStopsWork() async throws {
        let png = try ImageEncoder.png(Images.photo(width: 20, height: 20))
        let asked = Countdown()
        let origin = try await TestOrigin.start { request in
            if request.path == "/b.png" { asked.increment() }
            return .init(fields: [("Cache-Control", "max-age=600")], data: png)
        }
        defer { origin.stop() }
        let loader = try ResourceLoader(transport: AsyncHTTPClientTransport())
        let pipeline = try ImagePipeline(
            loader: loader,
            variants: nil,
            configuration: .init(maximumConcurrentDecodes: 1)
        )
        let (started, release) = (Countdown(), DispatchSemaphore(value: 0))
        let runsB = Countdown()
        // A holds the only decoding slot.
        let a = Task {
            try await pipeline.image(
                for: origin.url("/a.png"),
                processors: [Blocking(started: started, release: release)]
            )
        }
        await started.wait(for: 1)
        // B is loaded, then waits for the slot; its only caller goes.
        let b = Task { try await pipeline.image(for: origin.url("/b.png"), processors: [Counted(runs: runsB)]) }
        await asked.wait(for: 1)
        b.cancel()
        await #expect(throws: CancellationError.self) { try await b.value }
        release.signal()
        _ = try await a.value
        // C queues behind where B stood: had B's work gone on, it would have run first.
        let runsC = Countdown()
        _ = try await pipeline.image(for: origin.url("/c.png"), processors: [Counted(runs: runsC)])
        #expect(runsC.count == 1 && runsB.count == 0)
    }

    /// An origin that answers every path with a 20 × 20 PNG, fresh for 10 minutes.
    static func smallPhotoOrigin() async throws -> TestOrigin {
        let png = try ImageEncoder.png(Images.photo(width: 20, height: 20))
        return try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], data: png) }
    }

    @Test("image work runs on the pipeline's threads: a caller that goes while its image is processed gets no encoding")
    func cancellationBetweenDecodeAndEncode() async throws {
        let origin = try await Self.smallPhotoOrigin()
        defer { origin.stop() }
        let (started, release) = (Countdown(), DispatchSemaphore(value: 0))
        let (pipeline, variants) = try self.pipeline()
        let url = origin.url("/a.png")
        let processors: [any ImageProcessing] = [Blocking(started: started, release: release)]
        let asked = Task { try await pipeline.encodedImage(for: url, processors: processors, encoding: .png) }
        // The processor runs on one of the pipeline's threads, not the caller's.
        await started.wait(for: 1)
        #expect(pipeline.workers.statistics.running == 1)
        asked.cancel()
        release.signal()
        await #expect(throws: CancellationError.self) { try await asked.value }
        await pipeline.waitForBackgroundWork()
        // The decoding ran; no encoding followed it, and nothing was stored.
        #expect(pipeline.workers.statistics.completed == 1)
        let key = ImagePipeline.key(for: url, processors: processors) + "@" + ImageEncoding.png.description
        #expect(try !variants.contains(key))
    }

    @Test("past its queue's limit the pipeline refuses an image as busy; with a thread free, the same image is made")
    func busy() async throws {
        let origin = try await Self.smallPhotoOrigin()
        defer { origin.stop() }
        let loader = try ResourceLoader(transport: AsyncHTTPClientTransport())
        let pipeline = try ImagePipeline(
            loader: loader,
            variants: nil,
            configuration: .init(maximumConcurrentDecodes: 1, maximumQueuedDecodes: 0)
        )
        let gate = ThreadGate()
        let holding = Task { try await pipeline.workers.run { gate.wait() } }
        var arrivals = gate.arrivals.makeAsyncIterator()
        _ = await arrivals.next()
        let error = await #expect(throws: ImageError.self) {
            try await pipeline.encodedImage(for: origin.url("/a.png"), encoding: .png)
        }
        #expect(error?.code == .busy)
        gate.open()
        try await holding.value
        // With the thread free again, the same image is made.
        let made = try await pipeline.encodedImage(for: origin.url("/a.png"), encoding: .png)
        #expect(made.format == .png)
        #expect(pipeline.workers.statistics.refused == 1)
    }

    @Test("a pipeline without threads, or with a negative queue limit, is refused")
    func invalidWorkers() throws {
        let loader = try ResourceLoader(transport: AsyncHTTPClientTransport())
        #expect(throws: CacheError.self) {
            try ImagePipeline(loader: loader, variants: nil, configuration: .init(maximumConcurrentDecodes: 0))
        }
        #expect(throws: CacheError.self) {
            try ImagePipeline(loader: loader, variants: nil, configuration: .init(maximumQueuedDecodes: -1))
        }
    }

    @Test(
        "an original over the size limit is refused from its Content-Length, its body unread; one without a length, once it passes the limit",
        arguments: [false, true]
    )
    func sourceSizeLimit(declared: Bool) async throws {
        // The body stalls after the bytes sent: a pipeline that waited for all of it would
        // never answer.
        let head =
            declared
            ? "HTTP/1.1 200 OK\r\nContent-Length: 5000000\r\nCache-Control: max-age=600\r\n\r\n"
            : "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\n\r\n"
        let origin = try await RawOrigin.start { _ in
            RawOrigin.Reply(
                bytes: Data(head.utf8),
                repeating: declared ? nil : (Data(repeating: 0x89, count: 64 << 10), 32),
                staysOpen: true
            )
        }
        let loader = try ResourceLoader(transport: NIOTransport())
        let pipeline = try ImagePipeline(
            loader: loader,
            variants: nil,
            configuration: .init(maximumSourceSize: 1 << 20)
        )
        let error = await #expect(throws: ImageError.self) {
            try await pipeline.encodedImage(for: origin.url("/big.png"), encoding: .png)
        }
        #expect(error?.code == .tooLarge)
        #expect(error?.message.contains(declared ? "has 5000000 bytes" : "more than the 1048576 bytes") == true)
        #expect(pipeline.workers.statistics.completed == 0)
        // A body with a length the loader may store, it goes on reading for its cache, as it
        // does for any shared body whose readers leave; it ends with the connection.
        origin.stop()
        await pipeline.waitForBackgroundWork()
    }

    /// The picture an origin serves as its version `version` of /photo.png: a shade of it.
    static func picture(_ version: Int) throws -> Data {
        try ImageEncoder.png(
            Bitmap(width: 40, height: 30, format: .gray8, pixels: Data(repeating: UInt8(version * 50), count: 40 * 30))
        )
    }

    /// An origin that answers `data` with `fields`, and 304 with them to a conditional request
    /// (`If-None-Match` or `If-Modified-Since`), counted.
    static func revalidatingOrigin(
        _ fields: [(String, String)],
        _ data: Data,
        counting conditional: Countdown
    ) async throws -> TestOrigin {
        try await TestOrigin.start { request in
            guard request.headerFields[.ifNoneMatch] != nil || request.headerFields[.ifModifiedSince] != nil else {
                return .init(fields: fields, data: data)
            }
            conditional.increment()
            return .init(status: 304, fields: fields)
        }
    }

    /// An 8-pixel PNG thumbnail of `url`, by `pipeline`.
    static func thumbnail(_ url: URL, by pipeline: ImagePipeline) async throws -> EncodedImage {
        try await pipeline.encodedImage(for: url, processors: [Thumbnail(maximumPixelSize: 8)], encoding: .png)
    }

    @Test(
        "an expired variant stands while its original, revalidated, is unchanged: nothing is decoded again; a changed original makes it anew",
        arguments: ["ETag", "Last-Modified"]
    )
    func variantOutlivesFreshness(validator: String) async throws {
        let version = Countdown()
        let conditional = Countdown()
        let start = Date()
        // No freshness: with ETag, max-age=0; with Last-Modified alone, a new file.
        let origin = try await TestOrigin.start { request in
            // A file modified after the origin's Date (a clock ahead): its age, and so its
            // heuristic freshness, is none.
            let tag =
                validator == "ETag"
                ? "\"v\(version.count)\"" : HTTPDate.format(start.addingTimeInterval(TimeInterval(60 + version.count)))
            let asked = request.headerFields[
                HTTPField.Name(validator == "ETag" ? "If-None-Match" : "If-Modified-Since")!
            ]
            let fields =
                validator == "ETag" ? [("ETag", tag), ("Cache-Control", "max-age=0")] : [("Last-Modified", tag)]
            if asked == tag {
                conditional.increment()
                return .init(status: 304, fields: fields)
            }
            return .init(fields: fields, data: (try? Self.picture(version.count)) ?? Data())
        }
        defer { origin.stop() }
        let (pipeline, _) = try self.pipeline()
        let url = origin.url("/photo.png")
        let runs = Countdown()
        let processors: [any ImageProcessing] = [Counted(runs: runs)]

        let made = try await pipeline.encodedImage(for: url, processors: processors, encoding: .png)
        #expect(made.source == .made && runs.count == 1)
        let kept = try await pipeline.encodedImage(for: url, processors: processors, encoding: .png)
        #expect(kept.source == .revalidated && kept.data == made.data)
        #expect(runs.count == 1 && conditional.count == 1)

        version.increment()
        let remade = try await pipeline.encodedImage(for: url, processors: processors, encoding: .png)
        #expect(remade.source == .made && runs.count == 2 && remade.data != made.data)
        await pipeline.waitForBackgroundWork()
    }

    @Test(
        "a Content-Length of a terabyte, with no size limit, is read as it comes: a clear error when it ends short, no crash"
    )
    func hugeDeclaredLength() async throws {
        let origin = try await RawOrigin.start { _ in
            RawOrigin.Reply("HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\nnot that much")
        }
        defer { origin.stop() }
        let pipeline = try ImagePipeline(loader: ResourceLoader(transport: NIOTransport()), variants: nil)
        await #expect(throws: LoadError.self) {
            try await pipeline.encodedImage(for: origin.url("/huge.png"), encoding: .png)
        }
    }

    @Test("a request whose caller goes while its image is decoded stops before its next processor")
    func cancellationBetweenProcessors() async throws {
        let origin = try await Self.smallPhotoOrigin()
        defer { origin.stop() }
        let (started, release) = (Countdown(), DispatchSemaphore(value: 0))
        let runs = Countdown()
        let (pipeline, _) = try self.pipeline()
        let asked = Task {
            try await pipeline.image(
                for: origin.url("/a.png"),
                processors: [Blocking(started: started, release: release), Counted(runs: runs)]
            )
        }
        await started.wait(for: 1)
        asked.cancel()
        release.signal()
        await #expect(throws: CancellationError.self) { try await asked.value }
        await pipeline.waitForBackgroundWork()
        #expect(runs.count == 0)
    }

    @Test("a variant does not stand for an original whose bytes changed behind the same validator")
    func sameValidatorNewBytes() async throws {
        let version = Countdown()
        // An origin that ignores conditional requests and keeps its ETag across a change.
        let origin = try await TestOrigin.start { _ in
            .init(
                fields: [("ETag", "W/\"1\""), ("Cache-Control", "max-age=0")],
                data: (try? Self.picture(version.count)) ?? Data()
            )
        }
        defer { origin.stop() }
        let (pipeline, _) = try self.pipeline()
        let url = origin.url("/photo.png")
        let made = try await Self.thumbnail(url, by: pipeline)
        let same = try await Self.thumbnail(url, by: pipeline)
        #expect(same.source == .revalidated && same.original == .network && same.data == made.data)
        version.increment()
        let changed = try await Self.thumbnail(url, by: pipeline)
        #expect(changed.source == .made && changed.data != made.data)
        await pipeline.waitForBackgroundWork()
    }

    @Test("a variant of a no-cache original expires at once, whatever the original's age: it is revalidated each time")
    func noCacheOriginal() async throws {
        let conditional = Countdown()
        let png = try Self.picture(1)
        let origin = try await Self.revalidatingOrigin(
            [("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT"), ("Cache-Control", "no-cache")],
            png,
            counting: conditional
        )
        defer { origin.stop() }
        let (pipeline, _) = try self.pipeline()
        let url = origin.url("/photo.png")
        let made = try await Self.thumbnail(url, by: pipeline)
        #expect(made.source == .made && made.expires <= Date())
        let kept = try await Self.thumbnail(url, by: pipeline)
        #expect(kept.source == .revalidated && kept.original == .revalidated && conditional.count == 1)
        await pipeline.waitForBackgroundWork()
    }

    @Test("memory keeps a bitmap only while its original is fresh: without freshness, the original is revalidated")
    func memoryHonoursFreshness() async throws {
        let conditional = Countdown()
        let png = try Self.picture(1)
        let origin = try await Self.revalidatingOrigin(
            [("ETag", "\"1\""), ("Cache-Control", "max-age=0")],
            png,
            counting: conditional
        )
        defer { origin.stop() }
        let (pipeline, _) = try self.pipeline()
        let runs = Countdown()
        let url = origin.url("/photo.png")
        let first = try await pipeline.image(for: url, processors: [Counted(runs: runs)])
        await pipeline.waitForBackgroundWork()
        let second = try await pipeline.image(for: url, processors: [Counted(runs: runs)])
        #expect(second == first)
        #expect(
            pipeline.memory.statistics.hits == 0
                && pipeline.cachedImage(for: url, processors: [Counted(runs: runs)]) == nil
        )
        // The variant stood: the original was revalidated, not processed again.
        #expect(conditional.count == 1 && runs.count == 1)
        await pipeline.waitForBackgroundWork()
    }

    @Test("memory keeps a bitmap until its original's expiry by the pipeline's clock, not the process's")
    func memoryExpiresByThePipelinesClock() async throws {
        let png = try Self.picture(1)
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], data: png) }
        defer { origin.stop() }
        let clock = ManualWallClock()
        let (pipeline, _) = try self.pipeline(now: { clock.now })
        let url = origin.url("/photo.png")
        let thumbnail = [Thumbnail(maximumPixelSize: 8)]
        _ = try await pipeline.image(for: url, processors: thumbnail)
        clock.advance(by: 59)
        #expect(pipeline.cachedImage(for: url, processors: thumbnail) != nil)
        clock.advance(by: 2)
        #expect(pipeline.cachedImage(for: url, processors: thumbnail) == nil)
        await pipeline.waitForBackgroundWork()
    }

    @Test("an encoded variant asked for again comes from memory, not from variants")
    func encodedVariantsInMemory() async throws {
        let png = try Self.picture(1)
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], data: png) }
        defer { origin.stop() }
        let (pipeline, variants) = try self.pipeline()
        let url = origin.url("/photo.png")
        let made = try await Self.thumbnail(url, by: pipeline)
        #expect(made.source == .made)
        // Gone from disk: only memory can answer.
        let key =
            ImagePipeline.key(for: url, processors: [Thumbnail(maximumPixelSize: 8)]) + "@"
            + ImageEncoding.png.description
        #expect(try variants.removeValue(forKey: key))
        let again = try await Self.thumbnail(url, by: pipeline)
        #expect(again.source == .stored && again.data == made.data)
        // Removing the original's variants removes them from memory too.
        _ = try pipeline.removeVariants(of: url)
        let remade = try await Self.thumbnail(url, by: pipeline)
        #expect(remade.source == .made)
        await pipeline.waitForBackgroundWork()
    }

    @Test("an error status and bytes that are no image are clear errors, and nothing is kept")
    func badAnswers() async throws {
        let origin = try await TestOrigin.start { request in
            request.path == "/missing" ? .init(status: 404, body: "no") : .init(body: "<html>not an image</html>")
        }
        defer { origin.stop() }
        let (pipeline, variants) = try self.pipeline()
        await #expect { _ = try await pipeline.image(for: origin.url("/missing")) } throws: {
            ($0 as? ImageError)?.code == .status(404)
        }
        await #expect {
            _ = try await pipeline.image(for: origin.url("/page"), processors: [Thumbnail(maximumPixelSize: 8)])
        } throws: {
            ($0 as? ImageError)?.code == .unknownFormat
        }
        let stored = try variants.count
        #expect(pipeline.memory.count == 0 && stored == 0)
        await pipeline.waitForBackgroundWork()
    }

    @Test(
        "a variant lasts as long as its original was fresh; then it stands if the original is the same, else it is made again"
    )
    func variantExpiry() async throws {
        let version = Countdown()
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=60")], data: (try? Self.picture(version.count)) ?? Data())
        }
        defer { origin.stop() }
        let clock = ManualWallClock()
        let url = origin.url("/icon.png")
        let runs = Countdown()
        let (first, variants) = try self.pipeline(now: { clock.now })
        _ = try await first.image(for: url, processors: [Counted(runs: runs)])
        await first.waitForBackgroundWork()
        #expect(try variants.count == 1)
        // Within the minute, a new pipeline uses the variant.
        clock.advance(by: 30)
        let (second, _) = try self.pipeline(now: { clock.now })
        _ = try await second.image(for: url, processors: [Counted(runs: runs)])
        #expect(runs.count == 1)
        // After it, the original is loaded again: the same, the variant stands.
        clock.advance(by: 60)
        let (third, _) = try self.pipeline(now: { clock.now })
        _ = try await third.image(for: url, processors: [Counted(runs: runs)])
        #expect(runs.count == 1)
        // Changed (and the loader's copy of the original gone, as once it is stale), it is
        // made again.
        version.increment()
        try DiskCache(directory: self.directory.url.appending(path: "originals")).removeAll()
        clock.advance(by: 61)
        let (fourth, _) = try self.pipeline(now: { clock.now })
        _ = try await fourth.image(for: url, processors: [Counted(runs: runs)])
        #expect(runs.count == 2)
        await fourth.waitForBackgroundWork()
    }
}
