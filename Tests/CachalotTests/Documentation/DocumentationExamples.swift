import Cachalot
import CachalotAsyncHTTPClient
import CachalotImages
import CachalotServer
import CachalotTestOrigin
import CachalotTesting
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Testing
import UnixSignals

/// The Swift examples of the DocC articles (`Sources/*/*.docc/*.md`), each copied here line for
/// line so that it compiles with the tests: `scripts/check-doc-snippets` fails when an article's
/// example is not found here. The values an example uses without making them (`url`, `data`, a
/// directory) are made just before it. Examples that need no network run as tests against a
/// `TestOrigin`; the others (`static func`s) are compiled, never run.
@Suite("The documentation's examples", .timeLimit(.minutes(1)))
struct DocumentationExamples {
    // MARK: - Cachalot.docc

    @Test("Cachalot.md: a memory cache with a cost limit and a time-to-live keeps what was set")
    func memoryCache() throws {
        let cache = try MemoryCache<String, [UInt8]>(
            configuration: .init(costLimit: 64 << 20, timeToLive: .seconds(300))
        )
        let pixels = [UInt8](repeating: 0, count: 4 * 256 * 256)
        let url = "https://example.com/a.png"
        try cache.set(pixels, forKey: url, cost: pixels.count)
        let hit = cache.value(forKey: url)
        #expect(hit == pixels)
        #expect(cache.statistics.totalCost == pixels.count)
    }

    /// Loading.md, compiled only: it loads from example.com.
    static func loadingFromTheCacheOrTheOrigin() async throws {
        let loader = try ResourceLoader(
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: URL(filePath: "/var/cache/myapp"))
        )
        let image = try await loader.load(URL(string: "https://example.com/a.png")!)
        switch image.source {
        case .memory, .disk, .shared: print("from the cache")
        case .network, .revalidated: print("from the origin")
        case .stale(let reason): print("stale, because \(reason)")
        case .generated: print("504: nothing stored, and the policy said not to load")
        }
        await loader.waitForBackgroundWork()  // before the process exits
    }

    // MARK: - CachalotImages.docc

    /// A JPEG of `width` × `height` pixels: a gradient, so that it compresses as a photo would.
    static func photo(width: Int, height: Int) throws -> Data {
        var pixels = [UInt8](repeating: 255, count: width * height * 4)
        for y in 0..<height {
            for x in 0..<width {
                let offset = (y * width + x) * 4
                pixels[offset] = UInt8(x % 256)
                pixels[offset + 1] = UInt8(y % 256)
                pixels[offset + 2] = UInt8((x + y) % 256)
            }
        }
        return try ImageEncoder.jpeg(Bitmap(width: width, height: height, format: .rgba8, pixels: Data(pixels)))
    }

    /// An origin that answers every path with `photo`, fresh for an hour.
    static func imageOrigin(_ photo: Data) async throws -> TestOrigin {
        try await TestOrigin.start { _ in
            .init(fields: [("Content-Type", "image/jpeg"), ("Cache-Control", "max-age=3600")], data: photo)
        }
    }

    @Test("CachalotImages.md: a thumbnail through the pipeline, its original loaded from the origin")
    func imagesOverview() async throws {
        let origin = try await Self.imageOrigin(try Self.photo(width: 800, height: 600))
        defer { origin.stop() }
        let directory = try TemporaryDirectory()
        let originals = directory.url.appending(path: "originals")
        let variants = directory.url.appending(path: "variants")
        let url = origin.url("/photo.jpg")
        let loader = try ResourceLoader(transport: AsyncHTTPClientTransport(), disk: DiskCache(directory: originals))
        let pipeline = try ImagePipeline(loader: loader, variants: DiskCache(directory: variants))
        let thumbnail = try await pipeline.image(for: url, processors: [Thumbnail(maximumPixelSize: 256)])
        print(thumbnail.width, thumbnail.height, thumbnail.cost)
        #expect(thumbnail.width == 256 && thumbnail.height == 192)
        #expect(thumbnail.cost == 256 * 4 * 192)
        await pipeline.waitForBackgroundWork()
    }

    @Test("DecodingAndProcessing.md: size, decode, thumbnail at a reduced scale, resize, encode, errors")
    func decodingAndProcessing() throws {
        let data = try Self.photo(width: 1_600, height: 1_200)
        let decoder = ImageDecoder(maximumPixelCount: 50_000_000)
        let size = try decoder.size(of: data)
        let bitmap = try decoder.decode(data)
        print(size.width, size.height, bitmap.format, bitmap.cost)
        #expect(size == (1_600, 1_200) && bitmap.width == 1_600 && bitmap.format == .rgba8)

        let thumbnail = Thumbnail(maximumPixelSize: 256)
        let scale = thumbnail.requiredScale(sourceWidth: size.width, sourceHeight: size.height)
        let small = try thumbnail.process(try decoder.decode(data, scale: scale))
        #expect(scale == 0.16 && small.width == 256 && small.height == 192)

        let cover = try Resize(width: 640, height: 360, mode: .crop).process(bitmap)
        let webp = try ImageEncoder.encode(cover, as: .webp(quality: 75))
        let jpeg = try ImageEncoder.jpeg(cover, quality: 85, progressive: true)
        #expect(cover.width == 640 && cover.height == 360)
        #expect(ImageFormat(sniffing: webp) == .webp && ImageFormat(sniffing: jpeg) == .jpeg)

        do throws(ImageError) {
            _ = try decoder.decode(Data("not an image".utf8))
        } catch {
            switch error.code {
            case .unknownFormat, .corrupt, .truncated: print("not a usable image:", error.message)
            case .tooLarge: print("too many pixels:", error.message)
            case .unsupported, .outOfMemory, .status, .busy: print(error.message)
            }
        }
        let error = #expect(throws: ImageError.self) { try decoder.decode(Data("not an image".utf8)) }
        #expect(error?.code == .unknownFormat)
    }

    @Test("TheImagePipeline.md: configuration, memory and prefetch, bytes in a format, upkeep")
    func imagePipeline() async throws {
        let origin = try await Self.imageOrigin(try Self.photo(width: 640, height: 480))
        defer { origin.stop() }
        let directory = try TemporaryDirectory()
        let variants = directory.url.appending(path: "variants")
        let loader = try ResourceLoader(
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: directory.url.appending(path: "originals"))
        )
        let url = origin.url("/a.jpg")
        let upcoming = [origin.url("/b.jpg"), origin.url("/c.jpg")]

        let configuration = ImagePipeline.Configuration(
            memoryCostLimit: 256 << 20,
            maximumConcurrentDecodes: 2,
            decoder: ImageDecoder(maximumPixelCount: 40_000_000),
            variantEncoding: .webp(),
            maximumSourceSize: 20 << 20
        )
        let pipeline = try ImagePipeline(
            loader: loader,
            variants: DiskCache(directory: variants),
            configuration: configuration
        )

        let small: [any ImageProcessing] = [Thumbnail(maximumPixelSize: 128)]
        if let ready = pipeline.cachedImage(for: url, processors: small) {
            print("draw now:", ready.width, ready.height)
        }
        let prefetch = pipeline.prefetch(upcoming, processors: small)
        let loaded = await prefetch.wait()
        #expect(loaded == 2)
        #expect(pipeline.cachedImage(for: upcoming[0], processors: small)?.width == 128)
        #expect(pipeline.cachedImage(for: url, processors: small) == nil)

        let encoded = try await pipeline.encodedImage(for: url, processors: small, encoding: .webp())
        print(encoded.format.mediaType, encoded.data.count, encoded.expires, encoded.source)
        #expect(encoded.format == .webp && encoded.source == .made && encoded.expires > Date())

        try await pipeline.purge(olderThan: Date().addingTimeInterval(-7 * 86_400))
        print(try pipeline.diskSize ?? 0)
        await pipeline.waitForBackgroundWork()
        #expect(try pipeline.diskSize ?? 0 > 0)
        let again = try await pipeline.encodedImage(for: url, processors: small, encoding: .webp())
        #expect(again.source == .stored && again.data == encoded.data)
    }

    // MARK: - CachalotServer.docc

    static let quietLogger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A loader with a shared cache's rules, on a disk cache in `directory`.
    static func proxyLoader(_ directory: URL) throws -> ResourceLoader {
        var configuration = ResourceLoader.Configuration(rules: .sharedCache)
        configuration.maximumRedirects = 0
        return try ResourceLoader(
            configuration: configuration,
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: directory)
        )
    }

    /// CachalotServer.md, compiled only: it listens on 127.0.0.1:8080 until SIGTERM.
    static func proxyOverview() async throws {
        let logger = Logger(label: "proxy")
        let loader = try ResourceLoader(
            configuration: .init(
                rules: CacheRules(isShared: true, targetedFields: CacheServer.targetedFields),
                maximumRedirects: 0
            ),
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: URL(filePath: "/var/cache/proxy"))
        )
        let server = try CacheServer(
            configuration: .init(origin: URL(string: "http://127.0.0.1:8000")!),
            loader: loader,
            logger: logger
        )
        let group = ServiceGroup(services: [server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        try await group.run()
    }

    /// RunningTheProxy.md's whole program, compiled only: it listens on fixed ports until SIGTERM.
    static func runningTheProxy() async throws {
        let logger = Logger(label: "proxy")
        var loaderConfiguration = ResourceLoader.Configuration(
            rules: CacheRules(isShared: true, targetedFields: CacheServer.targetedFields)
        )
        loaderConfiguration.maximumRedirects = 0
        loaderConfiguration.maximumConnectionsPerHost = 256
        loaderConfiguration.memoryCostLimit = 512 << 20
        let loader = try ResourceLoader(
            configuration: loaderConfiguration,
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: URL(filePath: "/var/cache/proxy"))
        )

        var configuration = CacheServer.Configuration(origin: URL(string: "http://127.0.0.1:8000")!)
        configuration.listen = CacheServer.Address("0.0.0.0:8080")!
        configuration.admin = CacheServer.Address("127.0.0.1:9090")
        configuration.adminToken = "a-long-random-token"
        configuration.trustedProxies = ["10.0.0.2"]
        configuration.limits.maximumConnections = 4_096
        configuration.limits.sendTimeout = .seconds(30)

        let server = try CacheServer(configuration: configuration, loader: loader, logger: logger)
        let group = ServiceGroup(services: [server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        try await group.run()
    }

    @Test("RunningTheProxy.md: the configuration is what it says, and a server accepts it")
    func proxyConfiguration() throws {
        let directory = try TemporaryDirectory()
        var configuration = CacheServer.Configuration(origin: URL(string: "http://127.0.0.1:8000")!)
        configuration.listen = CacheServer.Address("0.0.0.0:8080")!
        configuration.admin = CacheServer.Address("127.0.0.1:9090")
        configuration.adminToken = "a-long-random-token"
        configuration.trustedProxies = ["10.0.0.2"]
        configuration.limits.maximumConnections = 4_096
        configuration.limits.sendTimeout = .seconds(30)
        #expect(configuration.listen == CacheServer.Address(host: "0.0.0.0", port: 8080))
        #expect(configuration.admin?.description == "127.0.0.1:9090")
        #expect(configuration.limits.maximumConnections == 4_096 && configuration.limits.maximumRequestLine == 8 << 10)
        let loader = try Self.proxyLoader(directory.url)
        _ = try CacheServer(configuration: configuration, loader: loader, logger: Self.quietLogger)
    }

    @Test("RunningTheProxy.md: on port 0, addresses gives the ports; a graceful shutdown ends run()")
    func proxyOnPortZero() async throws {
        let origin = try await TestOrigin.start()
        defer { origin.stop() }
        let directory = try TemporaryDirectory()
        let logger = Self.quietLogger
        let loader = try Self.proxyLoader(directory.url)
        var configuration = CacheServer.Configuration(origin: origin.url("/"))

        configuration.listen = CacheServer.Address(host: "127.0.0.1", port: 0)
        configuration.admin = CacheServer.Address(host: "127.0.0.1", port: 0)
        let server = try CacheServer(configuration: configuration, loader: loader, logger: logger)
        let group = ServiceGroup(services: [server], logger: logger)
        async let running: Void = group.run()
        let addresses = try await server.addresses
        print("proxy on port", addresses.proxy.port ?? 0, "admin on port", addresses.admin?.port ?? 0)
        await group.triggerGracefulShutdown()
        try await running

        #expect((addresses.proxy.port ?? 0) > 0 && (addresses.admin?.port ?? 0) > 0)
        #expect(addresses.proxy.port != addresses.admin?.port)
    }

    @Test("RunningTheProxy.md: an image path is signed with the endpoint's key, and a server accepts the endpoint")
    func imageEndpointPath() throws {
        let directory = try TemporaryDirectory()
        let variantsDirectory = directory.url.appending(path: "variants")
        var configuration = CacheServer.Configuration(origin: URL(string: "http://127.0.0.1:8000")!)

        let key = Data("a secret of at least sixteen bytes".utf8)
        let endpoint = ImageEndpoint(signing: .key(key), variants: try DiskCache(directory: variantsDirectory))
        configuration.images = endpoint
        let path = endpoint.path(for: "/photos/cat.jpg", options: "w256,h256,fill,webp")

        let signed = "/w256,h256,fill,webp/photos/cat.jpg"
        #expect(path == "/_image/" + ImageEndpoint.signature(of: signed, key: key) + signed)
        let loader = try Self.proxyLoader(directory.url)
        _ = try CacheServer(configuration: configuration, loader: loader, logger: Self.quietLogger)
    }
}
