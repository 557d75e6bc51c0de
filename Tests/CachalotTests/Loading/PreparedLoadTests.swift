import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing

@testable import Cachalot

/// What the cache answers without waiting (``ResourceLoader/prepare(_:policy:readsDisk:)``), a
/// prepared load resumed, and why a load went to the origin.
@Suite("ResourceLoader.prepare and forward reasons", .timeLimit(.minutes(1)))
struct PreparedLoadTests {
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

    @Test("a prepared miss has no answer and is counted once, when prepared; a fresh hit is answered and counted once")
    func answersHitsOnly() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "x") }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let request = HTTPRequest(method: .get, url: origin.url("/a"))
        let miss = try loader.prepare(request)
        #expect(miss.answer == nil)
        #expect(loader.statistics.requests == 1)
        let loaded = try await loader.stream(miss).collected()
        #expect(loaded.source == .network)
        #expect(loader.statistics.requests == 1)
        let hit = try #require(try loader.prepare(request).answer)
        #expect(hit.source == .memory)
        #expect(String(decoding: hit.body, as: UTF8.self) == "x")
        #expect(hit.response.headerFields[.age] != nil)
        #expect(loader.statistics.requests == 2)
        #expect(loader.statistics.memoryHits == 1)
        #expect(origin.requests.count == 1)
    }

    @Test("a miss prepared while another load of it runs, resumed after that load stored it, is answered from memory")
    func missStoredMeanwhile() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "x") }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let request = HTTPRequest(method: .get, url: origin.url("/a"))
        let streamed = try loader.prepare(request)
        let whole = try loader.prepare(request)
        #expect(streamed.answer == nil && whole.answer == nil)
        _ = try await loader.load(request)
        #expect(origin.requests.count == 1)
        // Both were decided misses before it was stored; neither flight they start asks again.
        let resumed = try await loader.stream(streamed).collected()
        #expect(resumed.source == .memory)
        #expect(resumed.forwardReason == nil)
        #expect(String(decoding: resumed.body, as: UTF8.self) == "x")
        let loaded = try await loader.answer(whole, body: nil, priority: .normal, delivery: .whole(nil, nil))
        #expect(try await loaded.collected().source == .memory)
        #expect(origin.requests.count == 1)
    }

    @Test("prepared from memory alone, an entry on disk is read when the load resumes, and memory is not asked again")
    func memoryOnly() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "x") }
        defer { origin.stop() }
        let request = HTTPRequest(method: .get, url: origin.url("/a"))
        let first = try self.makeLoader()
        _ = try await first.load(request)
        await first.waitForBackgroundWork()
        // A second loader on the same directory: nothing in its memory, the entry on disk.
        let loader = try self.makeLoader()
        let prepared = try loader.prepare(request, readsDisk: false)
        #expect(prepared.answer == nil)
        #expect(loader.tiers.memory?.statistics.misses == 1)
        let resumed = try await loader.stream(prepared).collected()
        #expect(resumed.source == .disk)
        #expect(String(decoding: resumed.body, as: UTF8.self) == "x")
        #expect(loader.tiers.memory?.statistics.misses == 1)
        #expect(loader.statistics.requests == 1)
        #expect(loader.statistics.diskHits == 1)
        // Read once, it is in memory, which answers without the disk.
        #expect(try loader.prepare(request, readsDisk: false).answer?.source == .memory)
        // Read from disk at once when the caller may wait.
        let other = try self.makeLoader()
        #expect(try other.prepare(request).answer?.source == .disk)
        #expect(origin.requests.count == 1)
    }

    @Test(
        "prepared from memory alone, a request whose entry has no file on disk is decided at once: a uri-miss, a vary-miss"
    )
    func missDecidedWithoutTheDisk() async throws {
        let origin = try await TestOrigin.start { request in
            .init(
                fields: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                body: request.headerFields[.acceptLanguage] ?? "none"
            )
        }
        defer { origin.stop() }
        func request(_ language: String) -> HTTPRequest {
            HTTPRequest(method: .get, url: origin.url("/v"), headerFields: [.acceptLanguage: language])
        }
        func reason(_ prepared: PreparedLoad) -> Resource.ForwardReason? {
            guard case .exchange(_, _, let reason)? = prepared.step else { return nil }
            return reason
        }
        let loader = try self.makeLoader()
        // Before this, a prepared miss of a loader with a disk tier was left to read the disk.
        #expect(reason(try loader.prepare(request("fr"), readsDisk: false)) == .uriMiss)
        _ = try await loader.load(request("fr"))
        await loader.waitForBackgroundWork()
        #expect(try loader.prepare(request("fr"), readsDisk: false).answer?.source == .memory)
        // The URL's responses vary; this variant has no file.
        #expect(reason(try loader.prepare(request("de"), readsDisk: false)) == .varyMiss)
        // Another loader on the directory: the URL's record is on disk, not in its memory.
        let other = try self.makeLoader()
        let prepared = try other.prepare(request("fr"), readsDisk: false)
        #expect(prepared.step == nil)
        #expect(try await other.stream(prepared).collected().source == .disk)
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
        #expect(try relaying.prepare(request).answer?.response.status.code == 301)
        let following = try self.makeLoader(maximumRedirects: 5)
        #expect(try await following.load(request).redirects.count == 1)
        #expect(try following.prepare(request).answer == nil)
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

    @Test(
        "a value derived from a stored head is made once per stored response, without Age, and again once revalidated"
    )
    func derivedFromHead() async throws {
        let origin = try await TestOrigin.start { request in
            request.headerFields[.ifNoneMatch] == "\"v1\""
                ? .init(status: 304, fields: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")])
                : .init(fields: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\""), ("Age", "5")], body: "x")
        }
        defer { origin.stop() }
        let clock = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        let loader = try ResourceLoader(
            configuration: .init(rules: .sharedCache, maximumRedirects: 0),
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: self.directory.url),
            now: { clock.withLock { $0 } }
        )
        let request = HTTPRequest(method: .get, url: origin.url("/a"))
        _ = try await loader.load(request)
        let made = Mutex(0)
        func derive(_ resource: Resource) -> String {
            resource.derivedFromHead { head in
                made.withLock { $0 += 1 }
                return "\(head.headerFields[.age] ?? "none") \(head.headerFields[.eTag] ?? "")"
            }
        }
        let first = try #require(try loader.prepare(request).answer)
        #expect(derive(first) == "none \"v1\"")
        clock.withLock { $0 += 10 }
        let second = try #require(try loader.prepare(request).answer)
        #expect(derive(second) == "none \"v1\"")
        #expect(made.withLock { $0 } == 1)
        // The age is the hit's own, not the one the value was made at.
        #expect(first.age == 5)
        #expect(second.age == 15)
        #expect(second.response.headerFields[.age] == "15")
        // Stale, revalidated with a 304: a new stored head, and a value made for it.
        clock.withLock { $0 += 120 }
        let revalidated = try await loader.load(request)
        #expect(revalidated.source == .revalidated)
        let third = try #require(try loader.prepare(request).answer)
        #expect(third.source == .memory)
        #expect(derive(third) == "none \"v1\"")
        #expect(made.withLock { $0 } == 2)
        // An optional value is made, not taken for a kept nil.
        _ = try await loader.load(HTTPRequest(method: .get, url: origin.url("/b")))
        let other = try #require(try loader.prepare(HTTPRequest(method: .get, url: origin.url("/b"))).answer)
        #expect(other.derivedFromHead { _ -> Int? in 42 } == 42)
        #expect(other.derivedFromHead { _ -> Int? in 7 } == 42)
        // An answer that is not stored: made each time.
        var given = Resource(body: Data(), response: HTTPResponse(status: .ok), source: .network)
        given.response.headerFields[.eTag] = "\"g\""
        #expect(derive(given) == "none \"g\"")
        #expect(derive(given) == "none \"g\"")
        #expect(made.withLock { $0 } == 4)
    }
}
