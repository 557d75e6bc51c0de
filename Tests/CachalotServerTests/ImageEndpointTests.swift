import Cachalot
import CachalotImages
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import MetricsTestKit
import NIOHTTP1
import Testing

@testable import CachalotServer

/// The proxy's image endpoint (`/_image/…`) against a real origin on 127.0.0.1.
@Suite("The proxy's image endpoint", .timeLimit(.minutes(1)))
struct ImageEndpointTests {
    static let key = Data((0..<32).map { UInt8($0) })
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    /// An origin with a 640 × 480 JPEG at /photo.jpg (fresh for 10 minutes), text at /text, a
    /// 404 elsewhere.
    static func origin() async throws -> TestOrigin {
        let jpeg = try ImageEncoder.jpeg(
            Bitmap(width: 640, height: 480, format: .gray8, pixels: Data((0..<640 * 480).map { UInt8($0 % 256) }))
        )
        return try await TestOrigin.start { request in
            switch request.path {
            case "/photo.jpg", "/photo.jpg?v=2": .init(fields: [("Cache-Control", "max-age=600")], data: jpeg)
            case "/private.jpg": .init(fields: [("Cache-Control", "private, max-age=600")], data: jpeg)
            case "/tagged.jpg" where request.headerFields[.ifNoneMatch] == "\"1\"":
                .init(status: 304, fields: [("ETag", "\"1\""), ("Cache-Control", "max-age=0")])
            case "/tagged.jpg": .init(fields: [("ETag", "\"1\""), ("Cache-Control", "max-age=0")], data: jpeg)
            case "/text": .init(fields: [("Cache-Control", "max-age=600")], body: "not an image")
            default: .init(status: 404, body: "none")
            }
        }
    }

    func endpoint(
        _ signing: ImageEndpoint.Signing = .key(Self.key),
        maximumSourceSize: Int = 1 << 20
    ) throws -> ImageEndpoint {
        ImageEndpoint(
            signing: signing,
            variants: try DiskCache(directory: self.directory.url.appending(path: "variants")),
            maximumSourceSize: maximumSourceSize,
            maximumPixelCount: 1_000_000
        )
    }

    /// A proxy with `endpoint`, its metrics recorded by `metrics` if given.
    func proxy(
        _ origin: TestOrigin,
        _ endpoint: ImageEndpoint,
        metrics: TestMetrics? = nil
    ) async throws
        -> ProxyHarness
    {
        try await ProxyHarness(origin: origin) {
            $0.images = endpoint
            if let metrics { $0.metrics = MetricsConfiguration(label: "cachalot_proxy", factory: metrics) }
        }
    }

    @Test("a signed thumbnail: the format the client takes best, Vary: Accept, made once, then a hit")
    func negotiatedThumbnail() async throws {
        let origin = try await Self.origin()
        let endpoint = try self.endpoint()
        let proxy = try await self.proxy(origin, endpoint)
        let path = endpoint.path(for: "/photo.jpg", options: "w64,h64")
        for (accept, format) in [
            ("image/avif,image/webp,*/*", ImageFormat.avif), ("image/webp,*/*;q=0.8", .webp),
            ("image/avif;q=0,image/webp", .webp), ("*/*", .jpeg),
        ] {
            let made = try await proxy.send(path, headers: [("Accept", accept)])
            #expect(made.status == 200, "\(accept): \(made.text)")
            #expect(made.headers["content-type"] == [format.mediaType], "\(accept)")
            #expect(made.headers["vary"] == ["Accept"])
            #expect(made.headers["cache-control"].first?.hasPrefix("public, max-age=") == true)
            // The third asks for WebP again: the variant the second made.
            if accept.hasPrefix("image/avif;q=0") {
                #expect(made.cacheStatus.hasPrefix("cachalot; hit; ttl="))
            } else {
                #expect(
                    made.cacheStatus.hasPrefix("cachalot; fwd=miss; ttl=") && made.cacheStatus.hasSuffix("; stored")
                )
            }
            #expect(ImageFormat(sniffing: made.body) == format)
            #expect(try ImageDecoder().size(of: made.body) == (64, 48))
            let hit = try await proxy.send(path, headers: [("Accept", accept)])
            #expect(hit.cacheStatus.hasPrefix("cachalot; hit; ttl=") && hit.body == made.body, "\(accept)")
        }
        // One original served every variant.
        #expect(origin.requests.count == 1)
        try await proxy.stop()
    }

    @Test(
        "an animated original: an animated WebP for a client that takes WebP, every frame resized; the first frame in other formats"
    )
    func animatedOriginal() async throws {
        var frames: [Animation.Frame] = []
        for index in 0..<3 {
            var pixels = Data()
            for offset in 0..<64 * 48 { pixels += [UInt8((offset + 80 * index) % 256), 90, 200, 255] }
            let bitmap = Bitmap(width: 64, height: 48, format: .rgba8, pixels: pixels)
            frames.append(Animation.Frame(bitmap: bitmap, duration: .milliseconds(40 * (index + 1))))
        }
        let webp = try ImageEncoder.webp(Animation(frames: frames, loopCount: 3))
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], data: webp) }
        let endpoint = try self.endpoint()
        let proxy = try await self.proxy(origin, endpoint)
        let cases: [(String, String, ImageFormat, Int)] = [
            ("w16", "image/avif,image/webp", .webp, 3), ("w16,auto", "image/webp", .webp, 3),
            ("w16", "image/avif", .avif, 1), ("w16", "*/*", .png, 1), ("w16,webp", "*/*", .webp, 3),
            ("w16,avif", "image/webp", .avif, 1),
        ]
        for (options, accept, format, frameCount) in cases {
            let answer = try await proxy.send(
                endpoint.path(for: "/a.webp", options: options),
                headers: [("Accept", accept)]
            )
            #expect(answer.status == 200, "\(options) \(accept): \(answer.text)")
            #expect(answer.headers["content-type"] == [format.mediaType], "\(options) \(accept)")
            #expect(try ImageDecoder().frameCount(of: answer.body) == frameCount, "\(options) \(accept)")
            #expect(try ImageDecoder().size(of: answer.body) == (16, 12))
            if frameCount > 1 {
                let animation = try ImageDecoder().decodeAnimation(answer.body)
                let durations: [Duration] = [.milliseconds(40), .milliseconds(80), .milliseconds(120)]
                #expect(animation.frames.map(\.duration) == durations)
                #expect(animation.loopCount == 3)
            }
        }
        #expect(origin.requests.count == 1)
        try await proxy.stop()
    }

    @Test("a format in the options is what is sent, without Vary; HEAD sends the head alone")
    func explicitFormatAndHead() async throws {
        let origin = try await Self.origin()
        let endpoint = try self.endpoint()
        let proxy = try await self.proxy(origin, endpoint)
        let path = endpoint.path(for: "/photo.jpg?v=2", options: "w100,h50,crop,png")
        let head = try await proxy.send(path, method: .HEAD, headers: [("Accept", "image/avif")])
        #expect(head.status == 200 && head.body.isEmpty && head.headers["vary"].isEmpty)
        let image = try await proxy.send(path, headers: [("Accept", "image/avif")])
        #expect(head.headers["content-length"] == [String(image.body.count)])
        #expect(image.headers["content-type"] == ["image/png"])
        #expect(try ImageDecoder().size(of: image.body) == (100, 50))
        #expect(origin.requests.first?.path == "/photo.jpg?v=2")
        try await proxy.stop()
    }

    @Test(
        "a variant of an original without freshness is kept and tagged: after a 304 for the original it is sent again, and a client's matching If-None-Match gets 304"
    )
    func revalidatedVariant() async throws {
        let origin = try await Self.origin()
        let endpoint = try self.endpoint()
        let metrics = TestMetrics()
        let proxy = try await self.proxy(origin, endpoint, metrics: metrics)
        let path = endpoint.path(for: "/tagged.jpg", options: "w64,png")
        let made = try await proxy.send(path)
        #expect(made.status == 200 && made.cacheStatus == "cachalot; fwd=miss; stored")
        // Stored without freshness: downstream may keep it, and must revalidate it by its tag.
        #expect(made.headers["cache-control"] == ["public, no-cache"])
        let tag = try #require(made.headers["etag"].first)
        #expect(tag.hasPrefix("W/\"") && tag.count == 36)
        let kept = try await proxy.send(path)
        #expect(kept.status == 200 && kept.body == made.body && kept.headers["etag"] == [tag])
        #expect(kept.cacheStatus == "cachalot; fwd=stale; fwd-status=304; ttl=0; stored")
        #expect(origin.requests.count == 2 && origin.requests.last?.headerFields[.ifNoneMatch] == "\"1\"")
        // A client that holds it is told it has not changed, with no body and no length.
        let current = try await proxy.send(path, headers: [("If-None-Match", tag)])
        #expect(current.status == 304 && current.body.isEmpty && current.headers["content-length"].isEmpty)
        #expect(current.headers["etag"] == [tag] && current.headers["content-type"].isEmpty)
        #expect(current.headers["cache-control"] == ["public, no-cache"])
        // A 304 is an answer, not an error.
        #expect(try metrics.expectCounter("cachalot_proxy_requests", [("cache", "error")]).totalValue == 0)
        let other = try await proxy.send(path, headers: [("If-None-Match", "W/\"other\"")])
        #expect(other.status == 200 && other.body == made.body)
        try await proxy.stop()
    }

    @Test(
        "image work has threads of its own: while they are all held, /healthz and cached GETs answer, and past the queue 503"
    )
    func imageWorkInItsPlace() async throws {
        let origin = try await Self.origin()
        var endpoint = try self.endpoint()
        endpoint.threads = 1
        endpoint.queueLimit = 1
        let metrics = TestMetrics()
        let proxy = try await self.proxy(origin, endpoint, metrics: metrics)
        let workers = try #require(proxy.server.images?.1.workers)
        // A proxied GET, cached before the image thread is taken.
        #expect(try await proxy.send("/text").status == 200)
        // Every image thread held: a decode that does not end until the gate opens.
        let gate = ThreadGate()
        let holding = Task { try await workers.run { gate.wait() } }
        var arrivals = gate.arrivals.makeAsyncIterator()
        _ = await arrivals.next()
        // One image waits for the thread: the queue is full.
        let path = endpoint.path(for: "/photo.jpg", options: "w64,avif")
        let waiting = Task { try await proxy.send(path) }
        while workers.statistics.waiting != 1 { await Task.yield() }
        let health = try await proxy.send("/healthz", admin: true)
        #expect(health.status == 200)
        let cached = try await proxy.send("/text")
        #expect(cached.status == 200 && cached.cacheStatus.hasPrefix("cachalot; hit"))
        let refused = try await proxy.send(endpoint.path(for: "/photo.jpg", options: "w32,avif"))
        #expect(refused.status == 503)
        #expect(refused.headers["retry-after"] == ["1"])
        #expect(refused.cacheStatus == "cachalot; detail=images-busy")
        #expect(try metrics.expectCounter("cachalot_proxy_images_busy").lastValue == 1)
        gate.open()
        try await holding.value
        let made = try await waiting.value
        #expect(made.status == 200 && ImageFormat(sniffing: made.body) == .avif)
        try await proxy.stop()
    }

    @Test("unsigned, mis-signed and altered paths are refused with 403; unsafe works only with signing disabled")
    func signatures() async throws {
        let origin = try await Self.origin()
        let endpoint = try self.endpoint()
        let proxy = try await self.proxy(origin, endpoint)
        let signed = endpoint.path(for: "/photo.jpg", options: "w64")
        let signature = signed.split(separator: "/")[1]
        for path in [
            "/_image/unsafe/w64/photo.jpg",
            "/_image/\(signature)/w640/photo.jpg",
            "/_image/\(signature)/w64/photo.jpg?x=1",
            "/_image/\(signature.dropLast())/w64/photo.jpg",
            "/_image/" + ImageEndpoint.signature(of: "/w64/photo.jpg", key: Data(repeating: 1, count: 32))
                + "/w64/photo.jpg",
            "/_image/%%%%/w64/photo.jpg",
        ] {
            let refused = try await proxy.send(path)
            #expect(refused.status == 403, "\(path)")
            #expect(refused.cacheStatus == "cachalot; detail=bad-signature")
        }
        #expect(try await proxy.send(signed).status == 200)
        #expect(origin.requests.count == 1)
        try await proxy.stop()

        let open = try await self.proxy(try await Self.origin(), try self.endpoint(.disabled))
        #expect(try await open.send("/_image/unsafe/w64/photo.jpg").status == 200)
        #expect(try await open.send(signed).status == 403)
        try await open.stop()
    }

    @Test("a source off the origin is refused with 403, even signed; one on it, as a whole URL, is served")
    func sources() async throws {
        let origin = try await Self.origin()
        let endpoint = try self.endpoint()
        let proxy = try await self.proxy(origin, endpoint)
        let encoded = { (url: String) in url.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }
        let elsewhere = "http://127.0.0.1:\(origin.port + 1)/photo.jpg"
        for source in [elsewhere, "http://127.0.0.1:\(origin.port)@example.com/photo.jpg"] {
            let refused = try await proxy.send(endpoint.path(for: encoded(source), options: "w64"))
            #expect(refused.status == 403 && refused.cacheStatus == "cachalot; detail=foreign-source", "\(source)")
        }
        let onOrigin = try await proxy.send(
            endpoint.path(for: encoded(origin.url("/photo.jpg").absoluteString), options: "w64")
        )
        #expect(onOrigin.status == 200, "\(onOrigin.text)")
        #expect(origin.requests.count == 1)
        try await proxy.stop()
    }

    @Test("bad options are 400; no image, or too large, 422; the origin's 404 is 404")
    func failures() async throws {
        let origin = try await Self.origin()
        let endpoint = try self.endpoint(maximumSourceSize: 1 << 20)
        let proxy = try await self.proxy(origin, endpoint)
        for (path, status, detail) in [
            (endpoint.path(for: "/photo.jpg", options: "w0"), 400, "bad-request"),
            (endpoint.path(for: "/photo.jpg", options: "w64,gif"), 400, "bad-request"),
            (endpoint.path(for: "/photo.jpg", options: "w64,fill"), 400, "bad-request"),
            (endpoint.path(for: "/text", options: "w64"), 422, "not-an-image"),
            (endpoint.path(for: "/missing.jpg", options: "w64"), 404, "origin-status"),
        ] {
            let answer = try await proxy.send(path)
            #expect(
                answer.status == status && answer.cacheStatus == "cachalot; detail=\(detail)",
                "\(path): \(answer.text)"
            )
            #expect(answer.headers["cache-control"] == ["no-store"])
        }
        try await proxy.stop()

        let small = try await self.proxy(try await Self.origin(), try self.endpoint(maximumSourceSize: 100))
        let tooLarge = try await small.send(endpoint.path(for: "/photo.jpg", options: "w64"))
        #expect(tooLarge.status == 422 && tooLarge.cacheStatus == "cachalot; detail=too-large")
        try await small.stop()
    }

    @Test("a variant of an original a shared cache may not store is made each time, and said not to be stored")
    func privateOriginal() async throws {
        let origin = try await Self.origin()
        let endpoint = try self.endpoint()
        let proxy = try await self.proxy(origin, endpoint)
        let path = endpoint.path(for: "/private.jpg", options: "w64,jpeg")
        for _ in 0..<2 {
            let answer = try await proxy.send(path)
            #expect(answer.status == 200)
            #expect(answer.headers["cache-control"] == ["no-store"])
            #expect(answer.cacheStatus == "cachalot; fwd=miss")
        }
        #expect(origin.requests.count == 2)
        try await proxy.stop()
    }

    @Test("a client that takes neither AVIF nor WebP gets the original's format from one load of the original")
    func originalFormatFromOneLoad() async throws {
        let origin = try await Self.origin()
        let endpoint = try self.endpoint()
        let proxy = try await self.proxy(origin, endpoint)
        // An original that is fetched anew for each request: each costs one fetch, not two.
        let path = endpoint.path(for: "/private.jpg", options: "w64")
        for count in 1...2 {
            let answer = try await proxy.send(path, headers: [("Accept", "*/*")])
            #expect(answer.status == 200 && answer.headers["content-type"] == ["image/jpeg"])
            #expect(answer.headers["vary"] == ["Accept"])
            #expect(origin.requests.count == count)
        }
        try await proxy.stop()
    }

    @Test("purging an original on the admin listener removes its variants too: the next one is made anew")
    func purgeRemovesVariants() async throws {
        let origin = try await Self.origin()
        let endpoint = try self.endpoint()
        let proxy = try await self.proxy(origin, endpoint)
        let path = endpoint.path(for: "/photo.jpg", options: "w64,jpeg")
        let other = endpoint.path(for: "/photo.jpg?v=2", options: "w64,jpeg")
        for variant in [path, other] { #expect(try await proxy.send(variant).cacheStatus.hasSuffix("; stored")) }
        #expect(try await proxy.send(path).cacheStatus.hasPrefix("cachalot; hit"))
        let purged = try await proxy.send("/purge?url=/photo.jpg", method: .POST, admin: true)
        #expect(purged.status == 200)
        let again = try await proxy.send(path)
        #expect(again.status == 200)
        #expect(again.cacheStatus.hasPrefix("cachalot; fwd=miss"), "\(again.cacheStatus)")
        #expect(origin.requests.filter { $0.path == "/photo.jpg" }.count == 2)
        // Another original's variant stays.
        #expect(try await proxy.send(other).cacheStatus.hasPrefix("cachalot; hit"))
        try await proxy.stop()
    }

    @Test("paths outside the prefix are proxied as before")
    func otherPaths() async throws {
        let origin = try await Self.origin()
        let proxy = try await self.proxy(origin, try self.endpoint())
        let text = try await proxy.send("/text")
        #expect(text.status == 200 && text.text == "not an image")
        try await proxy.stop()
    }
}
