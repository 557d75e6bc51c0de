import AsyncHTTPClient
import Cachalot
import CachalotServer
import CachalotTestOrigin
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Testing

@Suite("The admin listener")
struct AdminTests {
    static func origin() async throws -> TestOrigin {
        try await TestOrigin.start { request in
            .init(
                fields: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                body: "\(request.path ?? "") \(request.headerFields[.acceptLanguage] ?? "")"
            )
        }
    }

    @Test("/healthz answers without a token; purging without the token is refused with 401")
    func tokenRequired() async throws {
        let proxy = try await ProxyHarness(origin: try await Self.origin()) { $0.adminToken = "s3cret" }
        #expect(try await proxy.send("/healthz", admin: true).text == "ok\n")
        _ = try await proxy.send("/a")
        let refused = try await proxy.send("/purge?url=/a", method: .POST, admin: true)
        #expect(refused.status == 401)
        let wrong = try await proxy.send(
            "/purge?url=/a",
            method: .POST,
            headers: [("Authorization", "Bearer s3creT")],
            admin: true
        )
        #expect(wrong.status == 401)
        #expect(try await proxy.send("/a").cacheStatus.contains("hit"))
        let purged = try await proxy.send(
            "/purge?url=/a",
            method: .POST,
            headers: [("Authorization", "Bearer s3cret")],
            admin: true
        )
        #expect(purged.status == 200)
        #expect(try await proxy.send("/a").cacheStatus.contains("fwd=uri-miss"))
        try await proxy.stop()
    }

    @Test("Purging a URL removes every variant of it and nothing else")
    func purgeURL() async throws {
        let proxy = try await ProxyHarness(origin: try await Self.origin(), memoryCostLimit: 1 << 20)
        for language in ["fr", "de"] { _ = try await proxy.send("/a", headers: [("Accept-Language", language)]) }
        _ = try await proxy.send("/ab")
        let purged = try await proxy.send("/purge?url=/a", method: .POST, admin: true)
        #expect(purged.status == 200)
        #expect(purged.text.contains("\"removed\":"))
        // The first request after the purge finds nothing for the URL; the second, the first's variant.
        for (language, miss) in [("fr", "fwd=uri-miss"), ("de", "fwd=vary-miss")] {
            let again = try await proxy.send("/a", headers: [("Accept-Language", language)])
            #expect(again.cacheStatus.contains(miss), "\(language) was still stored")
            // The client has the whole body before the loader has stored it: the next request
            // must find it stored.
            await proxy.loader.waitForBackgroundWork()
        }
        #expect(try await proxy.send("/ab").cacheStatus.contains("hit"))
        try await proxy.stop()
    }

    @Test("Purging a prefix removes everything under it, in memory and on disk")
    func purgePrefix() async throws {
        let proxy = try await ProxyHarness(origin: try await Self.origin(), memoryCostLimit: 1 << 20)
        for path in ["/img/1", "/img/2", "/css/1"] { _ = try await proxy.send(path) }
        let purged = try await proxy.send("/purge?prefix=/img/", method: .POST, admin: true)
        #expect(purged.status == 200)
        #expect(try await proxy.send("/img/1").cacheStatus.contains("fwd=uri-miss"))
        #expect(try await proxy.send("/img/2").cacheStatus.contains("fwd=uri-miss"))
        #expect(try await proxy.send("/css/1").cacheStatus.contains("hit"))
        try await proxy.stop()
    }

    @Test("The admin listener is apart: the proxy's port forwards /purge to the origin like any path")
    func adminIsApart() async throws {
        let origin = try await Self.origin()
        let proxy = try await ProxyHarness(origin: origin)
        _ = try await proxy.send("/purge?url=/a", method: .POST)
        #expect(origin.requests.first?.path == "/purge?url=/a")
        try await proxy.stop()
    }
}

@Suite("Purging by tag")
struct TagPurgeTests {
    @Test("Purging a tag removes what Surrogate-Key or Cache-Tag tagged with it, in memory and on disk")
    func purgeTag() async throws {
        let origin = try await TestOrigin.start { request in
            let fields: [(String, String)] =
                switch request.path ?? "" {
                case "/a": [("Surrogate-Key", "product-1  shelf")]
                case "/b": [("Cache-Tag", "shelf , product-2")]
                default: [("Surrogate-Key", "product-10")]
                }
            return .init(fields: [("Cache-Control", "max-age=60")] + fields, body: "x")
        }
        let proxy = try await ProxyHarness(origin: origin, memoryCostLimit: 1 << 20)
        for path in ["/a", "/b", "/c"] { _ = try await proxy.send(path) }
        let shelf = try await proxy.send("/purge?tag=shelf", method: .POST, admin: true)
        #expect(shelf.text == "{\"removed\":4}\n")
        #expect(try await proxy.send("/a").cacheStatus.contains("fwd=uri-miss"))
        #expect(try await proxy.send("/b").cacheStatus.contains("fwd=uri-miss"))
        #expect(try await proxy.send("/c").cacheStatus.contains("hit"))
        // A tag is matched whole: product-1 is not product-10.
        _ = try await proxy.send("/purge?tag=product-1", method: .POST, admin: true)
        #expect(try await proxy.send("/c").cacheStatus.contains("hit"))
        try await proxy.stop()
    }
}
