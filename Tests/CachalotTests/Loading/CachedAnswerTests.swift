import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

/// What the cache answers without waiting, and why a load went to the origin.
@Suite("ResourceLoader.cachedAnswer and forward reasons", .timeLimit(.minutes(1)))
struct CachedAnswerTests {
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func makeLoader(maximumRedirects: Int = 0) throws -> ResourceLoader {
        try ResourceLoader(
            configuration: .init(rules: .sharedCache, maximumRedirects: maximumRedirects),
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: self.directory.url)
        )
    }

    @Test("a miss is not answered at once and not counted; a fresh hit is answered and counted once")
    func answersHitsOnly() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "x") }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let request = HTTPRequest(method: .get, url: origin.url("/a"))
        #expect(try loader.cachedAnswer(to: request) == nil)
        #expect(loader.statistics.requests == 0)
        _ = try await loader.load(request)
        let hit = try #require(try loader.cachedAnswer(to: request))
        #expect(hit.source == .memory)
        #expect(String(decoding: hit.body, as: UTF8.self) == "x")
        #expect(hit.response.headerFields[.age] != nil)
        #expect(loader.statistics.requests == 2)
        #expect(loader.statistics.memoryHits == 1)
        // A body over the caller's limit is left to a load, uncounted.
        #expect(try loader.cachedAnswer(to: request, largestBody: 0) == nil)
        #expect(loader.statistics.requests == 2)
        #expect(origin.requests.count == 1)
    }

    @Test("without readsDisk, an entry on disk alone is left to a load; with it, the disk answers")
    func memoryOnly() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "x") }
        defer { origin.stop() }
        let request = HTTPRequest(method: .get, url: origin.url("/a"))
        let first = try self.makeLoader()
        _ = try await first.load(request)
        await first.waitForBackgroundWork()
        // A second loader on the same directory: nothing in its memory, the entry on disk.
        let loader = try self.makeLoader()
        #expect(try loader.cachedAnswer(to: request, readsDisk: false) == nil)
        #expect(loader.statistics.requests == 0)
        let hit = try #require(try loader.cachedAnswer(to: request))
        #expect(hit.source == .disk)
        // Read once, it is in memory, which answers without the disk.
        #expect(try loader.cachedAnswer(to: request, readsDisk: false)?.source == .memory)
        #expect(origin.requests.count == 1)
    }

    @Test("a stored redirect is answered at once when redirects are relayed, not when they are followed")
    func redirects() async throws {
        let origin = try await TestOrigin.start { request in
            request.path == "/moved"
                ? .init(status: 301, fields: [("Location", "/there"), ("Cache-Control", "max-age=60")])
                : .init(fields: [("Cache-Control", "max-age=60")], body: "there")
        }
        defer { origin.stop() }
        let request = HTTPRequest(method: .get, url: origin.url("/moved"))
        let relaying = try self.makeLoader()
        _ = try await relaying.load(request)
        #expect(try relaying.cachedAnswer(to: request)?.response.status.code == 301)
        let following = try self.makeLoader(maximumRedirects: 5)
        #expect(try await following.load(request).redirects.count == 1)
        #expect(try following.cachedAnswer(to: request) == nil)
    }

    @Test("forward reasons: uri-miss, vary-miss for a new variant, request, stale, method, bypass")
    func forwardReasons() async throws {
        let origin = try await TestOrigin.start { request in
            if request.path == "/stale" { return .init(fields: [("Cache-Control", "max-age=0")], body: "s") }
            return .init(
                fields: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                body: request.headerFields[.acceptLanguage] ?? "none"
            )
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        func reason(
            _ path: String,
            method: HTTPRequest.Method = .get,
            fields: HTTPFields = [:],
            policy: CachePolicy? = nil
        ) async throws -> Resource.ForwardReason? {
            var request = HTTPRequest(method: method, url: origin.url(path))
            request.headerFields = fields
            return try await loader.load(request, policy: policy).forwardReason
        }
        #expect(try await reason("/v", fields: [.acceptLanguage: "fr"]) == .uriMiss)
        #expect(try await reason("/v", fields: [.acceptLanguage: "fr"]) == nil)
        #expect(try await reason("/v", fields: [.acceptLanguage: "de"]) == .varyMiss)
        #expect(try await reason("/v", fields: [.acceptLanguage: "de", .cacheControl: "no-cache"]) == .request)
        _ = try await reason("/stale")
        #expect(try await reason("/stale") == .stale)
        #expect(try await reason("/v", method: .post) == .method)
        #expect(try await reason("/v", fields: [.acceptLanguage: "fr"], policy: .reloadIgnoringCacheData) == .bypass)
    }
}
