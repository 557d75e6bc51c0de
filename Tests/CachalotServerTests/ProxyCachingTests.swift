import AsyncHTTPClient
import Cachalot
import CachalotServer
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Synchronization
import Testing

@testable import Cachalot

@Suite("The proxy caches as a shared cache")
struct ProxyCachingTests {
    @Test("A response with Set-Cookie reaches its client, and is not stored: the next client gets its own")
    func setCookieNotStored() async throws {
        let counter = Counter()
        let origin = try await TestOrigin.start { _ in
            let count = counter.next()
            return .init(
                fields: [("Cache-Control", "public, max-age=60"), ("Set-Cookie", "id=\(count)")],
                body: "page"
            )
        }
        let proxy = try await ProxyHarness(origin: origin)
        let first = try await proxy.send("/account")
        #expect(first.headers["set-cookie"] == ["id=1"])
        #expect(!first.cacheStatus.contains("stored"))
        let second = try await proxy.send("/account")
        #expect(second.headers["set-cookie"] == ["id=2"])
        #expect(!second.cacheStatus.contains("hit"))
        #expect(origin.requests.count == 2)
        try await proxy.stop()
    }

    @Test("A miss goes to the origin and is stored; the next request is a hit with Age, Via and Cache-Status")
    func missThenHit() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")], body: "hello")
        }
        let proxy = try await ProxyHarness(origin: origin)
        let miss = try await proxy.send("/a?b=1")
        #expect(miss.status == 200)
        #expect(miss.text == "hello")
        #expect(miss.cacheStatus == "cachalot; fwd=uri-miss; fwd-status=200; stored")
        #expect(miss.headers["via"].contains("1.1 cachalot"))
        #expect(miss.headers["date"].count == 1)
        let hit = try await proxy.send("/a?b=1")
        #expect(hit.status == 200)
        #expect(hit.text == "hello")
        #expect(hit.cacheStatus.hasPrefix("cachalot; hit; ttl="))
        let ttl = Int(hit.cacheStatus.split(separator: "=").last ?? "") ?? -1
        #expect((1...60).contains(ttl))
        #expect(hit.headers["age"].count == 1)
        #expect(origin.requests.count == 1)
        #expect(origin.requests.first?.path == "/a?b=1")
        try await proxy.stop()
    }

    @Test(
        "A body comes back byte for byte on the miss and from memory, whole and in a range, whether copied or written from its own bytes",
        arguments: [1_000, 16_385, 100_000, 1 << 20, (1 << 20) + 1]
    )
    func bodyBytes(size: Int) async throws {
        let data = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], data: data) }
        // The memory tier keeps entries of up to a tenth of its limit: 1.6 MiB here.
        let proxy = try await ProxyHarness(origin: origin, memoryCostLimit: 16 << 20)
        let miss = try await proxy.send("/b")
        #expect(miss.body == data)
        let hit = try await proxy.send("/b")
        #expect(hit.cacheStatus.hasPrefix("cachalot; hit"))
        // From memory, not from the disk tier's write in the background, which may not be done.
        #expect(proxy.loader.tiers.memory?.statistics.hits == 1)
        #expect(hit.body == data)
        let range = try await proxy.send("/b", headers: [("Range", "bytes=500-\(size - 2)")])
        #expect(range.status == 206)
        #expect(range.body == data[500...(size - 2)])
        #expect(origin.requests.count == 1)
        try await proxy.stop()
    }

    @Test("A miss is prepared once, on the event loop: memory is asked once, and the request counted once")
    func missPreparedOnce() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "x") }
        let proxy = try await ProxyHarness(origin: origin, memoryCostLimit: 1 << 20)
        let miss = try await proxy.send("/once")
        #expect(miss.cacheStatus.contains("fwd=uri-miss"))
        // Before, the connection's task converted, keyed and looked the miss up again.
        #expect(proxy.loader.tiers.memory?.statistics.misses == 1)
        #expect(proxy.loader.statistics.requests == 1)
        let hit = try await proxy.send("/once")
        #expect(hit.cacheStatus.contains("hit"))
        #expect(proxy.loader.tiers.memory?.statistics.misses == 1)
        #expect(proxy.loader.statistics.requests == 2)
        #expect(origin.requests.count == 1)
        try await proxy.stop()
    }

    @Test(
        "Two servers of other names over one loader: a memory hit carries the Via and Cache-Status of the server it went through"
    )
    func sharedLoaderKeepsEachName() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "x") }
        let proxy = try await ProxyHarness(origin: origin, memoryCostLimit: 1 << 20)
        let logger = Logger(label: "edge", factory: { _ in SwiftLogNoOpLogHandler() })
        var configuration = CacheServer.Configuration(
            origin: origin.url("/"),
            listen: .init(host: "127.0.0.1", port: 0)
        )
        configuration.name = "edge"
        let edge = try CacheServer(configuration: configuration, loader: proxy.loader, logger: logger)
        let group = ServiceGroup(services: [edge], logger: logger)
        let running = Task { try await group.run() }
        let edgePort = try #require(try await edge.addresses.proxy.port)
        func viaEdge() async throws -> String {
            try await RawClient.exchange("GET /n HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", port: edgePort)
        }
        _ = try await proxy.send("/n")
        // The head kept with the stored response was made by the first server.
        #expect(try await proxy.send("/n").headers["via"] == ["1.1 cachalot"])
        let edgeHit = try await viaEdge()
        #expect(edgeHit.contains("Via: 1.1 edge\r\n"), "\(edgeHit)")
        #expect(edgeHit.contains("Cache-Status: edge; hit"), "\(edgeHit)")
        #expect(!edgeHit.contains("cachalot"), "\(edgeHit)")
        let again = try await proxy.send("/n")
        #expect(again.headers["via"] == ["1.1 cachalot"])
        #expect(again.cacheStatus.hasPrefix("cachalot; hit"))
        #expect(origin.requests.count == 1)
        await group.triggerGracefulShutdown()
        try await running.value
        try await proxy.stop()
    }

    @Test("Pipelined requests are answered in order, whether from the cache at once or from the origin")
    func pipelinedInOrder() async throws {
        let origin = try await TestOrigin.start { request in
            .init(fields: [("Cache-Control", "max-age=60")], body: "body of \(request.path ?? "?")")
        }
        let proxy = try await ProxyHarness(origin: origin)
        // A miss, then a hit of what it stored, a miss, and a hit again, sent in one write.
        let requests = ["/a", "/a", "/b", "/a"].enumerated().map { index, path in
            "GET \(path) HTTP/1.1\r\nHost: x\r\n" + (index == 3 ? "Connection: close\r\n" : "") + "\r\n"
        }
        let received = try await RawClient.exchange(requests.joined(), port: proxy.port)
        // Bodies end without a line break: each status line follows the body before it on its line.
        #expect(received.components(separatedBy: "HTTP/1.1 200 OK\r\n").count == 5, "\(received)")
        let bodies = received.components(separatedBy: "body of ").dropFirst().map { $0.prefix(2) }
        #expect(bodies == ["/a", "/a", "/b", "/a"])
        let statuses = received.components(separatedBy: "\r\n").filter { $0.hasPrefix("Cache-Status:") }
        #expect(statuses.map { $0.contains("hit") } == [false, true, false, true])
        #expect(origin.requests.map(\.path) == ["/a", "/b"])
        try await proxy.stop()
    }

    @Test("A response the shared rules forbid storing (private) is relayed and not stored")
    func privateIsNotStored() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "private, max-age=60")], body: "mine")
        }
        let proxy = try await ProxyHarness(origin: origin)
        let first = try await proxy.send("/p")
        let second = try await proxy.send("/p")
        #expect(first.text == "mine" && second.text == "mine")
        #expect(first.cacheStatus == "cachalot; fwd=uri-miss; fwd-status=200")
        #expect(second.cacheStatus == "cachalot; fwd=uri-miss; fwd-status=200")
        #expect(origin.requests.count == 2)
        try await proxy.stop()
    }

    @Test("A stale response is validated: the 304 freshens it and Cache-Status says fwd=stale; fwd-status=304")
    func staleIsRevalidated() async throws {
        let origin = try await TestOrigin.start { request in
            if request.headerFields[.ifNoneMatch] == "\"v1\"" {
                return .init(status: 304, fields: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")])
            }
            return .init(fields: [("Cache-Control", "max-age=0"), ("ETag", "\"v1\"")], body: "body")
        }
        let proxy = try await ProxyHarness(origin: origin)
        _ = try await proxy.send("/s")
        let revalidated = try await proxy.send("/s")
        #expect(revalidated.status == 200)
        #expect(revalidated.text == "body")
        #expect(revalidated.cacheStatus.hasPrefix("cachalot; fwd=stale; fwd-status=304"))
        #expect(origin.requests.count == 2)
        try await proxy.stop()
    }

    @Test("A request's no-cache forwards with fwd=request although a fresh response is stored")
    func requestNoCache() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "x") }
        let proxy = try await ProxyHarness(origin: origin)
        _ = try await proxy.send("/r")
        let forced = try await proxy.send("/r", headers: [("Cache-Control", "no-cache")])
        #expect(forced.cacheStatus.hasPrefix("cachalot; fwd=request; fwd-status=200"))
        #expect(origin.requests.count == 2)
        try await proxy.stop()
    }

    @Test("A POST goes to the origin with its body (fwd=method) and invalidates the stored GET")
    func postInvalidates() async throws {
        let origin = try await TestOrigin.start { request in
            request.method == .post
                ? .init(status: 204) : .init(fields: [("Cache-Control", "max-age=60")], body: "list")
        }
        let proxy = try await ProxyHarness(origin: origin)
        _ = try await proxy.send("/items")
        #expect(try await proxy.send("/items").cacheStatus.contains("hit"))
        let posted = try await proxy.send("/items", method: .POST, body: Data("new".utf8))
        #expect(posted.status == 204)
        #expect(posted.cacheStatus == "cachalot; fwd=method; fwd-status=204")
        let after = try await proxy.send("/items")
        #expect(after.cacheStatus.hasPrefix("cachalot; fwd=uri-miss"))
        #expect(origin.requests.map(\.method) == [.get, .post, .get])
        try await proxy.stop()
    }

    @Test("HEAD is answered from a stored GET, and a HEAD miss fetches the GET so that it is stored")
    func headFromStoredGet() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=60")], body: "twelve bytes")
        }
        let proxy = try await ProxyHarness(origin: origin)
        let headMiss = try await proxy.send("/h", method: .HEAD)
        #expect(headMiss.status == 200)
        #expect(headMiss.body.isEmpty)
        #expect(headMiss.headers["content-length"] == ["12"])
        // The HEAD's answer goes before the GET's body is read and stored (the harness has no
        // memory tier): until then, a request for it is a miss that the loop decides at once.
        var isStored = false
        for _ in 0..<100_000 where !isStored {
            isStored = try proxy.loader.prepare(HTTPRequest(method: .get, url: origin.url("/h"))).answer != nil
            if !isStored { await Task.yield() }
        }
        #expect(isStored)
        let get = try await proxy.send("/h")
        #expect(get.text == "twelve bytes")
        #expect(get.cacheStatus.contains("hit"))
        let headHit = try await proxy.send("/h", method: .HEAD)
        #expect(headHit.cacheStatus.contains("hit"))
        #expect(headHit.headers["content-length"] == ["12"])
        #expect(origin.requests.map(\.method) == [.get])
        try await proxy.stop()
    }

    @Test("Vary: each variant is stored and answered for its own request; a new variant is fwd=vary-miss")
    func varyVariants() async throws {
        let origin = try await TestOrigin.start { request in
            .init(
                fields: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                body: request.headerFields[.acceptLanguage] ?? "none"
            )
        }
        let proxy = try await ProxyHarness(origin: origin)
        let first = try await proxy.send("/v", headers: [("Accept-Language", "fr")])
        #expect(first.text == "fr")
        #expect(first.cacheStatus.hasPrefix("cachalot; fwd=uri-miss;"))
        let german = try await proxy.send("/v", headers: [("Accept-Language", "de")])
        #expect(german.text == "de")
        #expect(german.cacheStatus.hasPrefix("cachalot; fwd=vary-miss;"))
        let french = try await proxy.send("/v", headers: [("Accept-Language", "fr")])
        #expect(french.text == "fr")
        #expect(french.cacheStatus.contains("hit"))
        #expect(origin.requests.count == 2)
        try await proxy.stop()
    }

    @Test("A body is relayed as it arrives: the client reads its start before the origin has sent the rest")
    func streamsBeforeTheOriginFinishes() async throws {
        let reached = Gate()
        let body = Data(repeating: 7, count: 256 << 10)
        let origin = try await TestOrigin.start { _ in
            var reply = TestOrigin.Reply(fields: [("Cache-Control", "max-age=60")], data: body)
            reply.stall = (after: 64 << 10, reached: { reached.open() })
            return reply
        }
        let proxy = try await ProxyHarness(origin: origin) { $0.limits.shutdownGracePeriod = .milliseconds(100) }
        let response = try await proxy.start("/big")
        await reached.wait()
        var received = 0
        for try await piece in response.body {
            received += piece.readableBytes
            if received >= 64 << 10 { break }
        }
        #expect(received >= 64 << 10)
        // The origin never finished: nothing was stored.
        #expect(try proxy.disk.count == 0)
        try await proxy.stop()
    }

    @Test("A response that ends early is cut off for the client too, and nothing is stored")
    func truncatedIsNotStored() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(
                fields: [("Cache-Control", "max-age=60")],
                body: String(repeating: "x", count: 1_000),
                truncatedAfter: 10
            )
        }
        let proxy = try await ProxyHarness(origin: origin)
        await #expect(throws: (any Error).self) { _ = try await proxy.send("/t") }
        #expect(try proxy.disk.count == 0)
        let again = try? await proxy.send("/t")
        #expect(again == nil)
        #expect(origin.requests.count == 2)
        try await proxy.stop()
    }
}

@Suite("Targeted cache-control fields (RFC 9213)")
struct ProxyTargetedFieldTests {
    static func origin() async throws -> TestOrigin {
        try await TestOrigin.start { request in
            switch request.path ?? "" {
            case "/cdn":
                .init(fields: [("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60")], body: "cdn")
            case "/ours":
                .init(
                    fields: [
                        ("Cache-Control", "max-age=60"), ("CDN-Cache-Control", "max-age=60"),
                        ("Cachalot-Cache-Control", "no-store"),
                    ],
                    body: "ours"
                )
            default:
                .init(fields: [("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60, ,,=")], body: "bad")
            }
        }
    }

    @Test("CDN-Cache-Control takes precedence over Cache-Control, and Cachalot-Cache-Control over both")
    func precedence() async throws {
        let origin = try await Self.origin()
        let proxy = try await ProxyHarness(origin: origin)
        _ = try await proxy.send("/cdn")
        let cdn = try await proxy.send("/cdn")
        #expect(cdn.cacheStatus.hasPrefix("cachalot; hit"))
        // The field is relayed as the origin sent it.
        #expect(cdn.headers["cdn-cache-control"] == ["max-age=60"])
        _ = try await proxy.send("/ours")
        #expect(try await proxy.send("/ours").cacheStatus.contains("fwd=uri-miss"))
        // An invalid targeted field is ignored: Cache-Control's no-store rules.
        _ = try await proxy.send("/invalid")
        #expect(try await proxy.send("/invalid").cacheStatus.contains("fwd=uri-miss"))
        try await proxy.stop()
    }

    @Test("With targeted fields off, Cache-Control alone governs")
    func off() async throws {
        let proxy = try await ProxyHarness(origin: try await Self.origin(), targetedFields: [])
        _ = try await proxy.send("/cdn")
        #expect(try await proxy.send("/cdn").cacheStatus.contains("fwd=uri-miss"))
        try await proxy.stop()
    }
}

@Suite("Collapsed forwarding in the proxy", .timeLimit(.minutes(1)))
struct ProxyCollapsedTests {
    @Test("Identical misses that arrive together make one origin request; the follower's Cache-Status says collapsed")
    func collapsed() async throws {
        let gate = Gate()
        let origin = try await TestOrigin.start { _ in
            await gate.wait()
            return .init(fields: [("Cache-Control", "max-age=60")], body: "once")
        }
        let proxy = try await ProxyHarness(origin: origin)
        async let first = proxy.send("/c")
        while origin.requests.isEmpty, !Task.isCancelled { await Task.yield() }
        async let second = proxy.send("/c")
        while proxy.loader.callersOfStreamedFlight(origin.url("/c")) < 2, origin.requests.count < 2 {
            await Task.yield()
        }
        gate.open()
        let replies = try await [first, second]
        #expect(replies.map(\.text) == ["once", "once"])
        let statuses = replies.map(\.cacheStatus).sorted()
        #expect(
            statuses == [
                "cachalot; fwd=uri-miss; fwd-status=200; stored",
                "cachalot; fwd=uri-miss; fwd-status=200; stored; collapsed",
            ]
        )
        #expect(origin.requests.count == 1)
        try await proxy.stop()
    }
}

/// Counts calls from any thread: 1 for the first.
private final class Counter: Sendable {
    private let count = Mutex(0)

    func next() -> Int {
        self.count.withLock { count in
            count += 1
            return count
        }
    }
}
