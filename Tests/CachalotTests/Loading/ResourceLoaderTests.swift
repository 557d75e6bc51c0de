import AsyncHTTPClient
import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import MetricsTestKit
import Synchronization
import Testing

@testable import Cachalot

/// Each test waits for its loaders' background work before it ends: a disk write that outlived
/// the test would make its removed directory again.
@Suite("ResourceLoader against a real origin on 127.0.0.1", .timeLimit(.minutes(1)))
struct ResourceLoaderTests {
    let clock = ManualWallClock()
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func makeLoader(
        _ configuration: ResourceLoader.Configuration = .init(),
        disk: Bool = true,
        transport: (any HTTPTransport)? = nil
    ) throws -> ResourceLoader {
        let clock = self.clock
        return try ResourceLoader(
            configuration: configuration,
            transport: transport ?? AsyncHTTPClientTransport(),
            disk: disk ? DiskCache(directory: self.directory.url, now: { clock.now }) : nil,
            now: { clock.now }
        )
    }

    @Test("a fresh response is answered from memory, then from disk by a new loader, and sends nothing")
    func freshHits() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "hello") }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let first = try await loader.load(origin.url("/a?x=1"))
        #expect(first.source == .network)
        #expect(first.body == Data("hello".utf8))
        self.clock.advance(by: 30)
        let second = try await loader.load(origin.url("/a?x=1"))
        #expect(second.source == .memory)
        #expect(second.response.headerFields[.age] == "30")
        await loader.waitForBackgroundWork()
        let other = try self.makeLoader()
        #expect(try await other.load(origin.url("/a?x=1")).source == .disk)
        #expect(try await other.load(origin.url("/a?x=1")).source == .memory)
        // The query is part of the key.
        #expect(try await other.load(origin.url("/a?x=2")).source == .network)
        #expect(origin.requests.count == 2)
        let statistics = loader.statistics
        #expect(statistics.requests == 2 && statistics.misses == 1 && statistics.memoryHits == 1)
        #expect(statistics.bytesFromNetwork == 5 && statistics.bytesFromCache == 5)
        await other.waitForBackgroundWork()
    }

    @Test("a stale response is validated with its ETag; a 304 refreshes the head and keeps the body")
    func notModified() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\""), ("X-Version", "1")], body: "body")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        _ = try await loader.load(origin.url("/r"))
        origin.respond { _ in
            .init(status: 304, fields: [("Cache-Control", "max-age=120"), ("ETag", "\"v1\""), ("X-Version", "2")])
        }
        self.clock.advance(by: 61)
        let revalidated = try await loader.load(origin.url("/r"))
        #expect(revalidated.source == .revalidated)
        #expect(revalidated.body == Data("body".utf8))
        #expect(revalidated.response.headerFields[HTTPField.Name("X-Version")!] == "2")
        #expect(origin.requests.last?.headerFields[.ifNoneMatch] == "\"v1\"")
        self.clock.advance(by: 100)
        #expect(try await loader.load(origin.url("/r")).source == .memory)
        await loader.waitForBackgroundWork()
        #expect(
            try await self.makeLoader().load(origin.url("/r")).response.headerFields[HTTPField.Name("X-Version")!]
                == "2"
        )
        #expect(origin.requests.count == 2)
        #expect(loader.statistics.revalidations == 1 && loader.statistics.notModified == 1)
    }

    @Test("what a miss stores reaches the disk by the time waitForBackgroundWork() returns")
    func diskWriteAfterAnswer() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "later") }
        defer { origin.stop() }
        let disk = try DiskCache(directory: self.directory.url)
        let loader = try ResourceLoader(
            transport: AsyncHTTPClientTransport(),
            disk: disk,
            now: { [clock] in clock.now }
        )
        _ = try await loader.load(origin.url("/w"))
        await loader.waitForBackgroundWork()
        let key = try #require(CacheKey.url(of: origin.url("/w")))
        #expect(try disk.data(forKey: key) == Data("later".utf8))
    }

    @Test("a 200 to a validation replaces the stored response")
    func modified() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=1"), ("ETag", "\"v1\"")], body: "old")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        _ = try await loader.load(origin.url("/r"))
        origin.respond { _ in .init(fields: [("Cache-Control", "max-age=60"), ("ETag", "\"v2\"")], body: "new") }
        self.clock.advance(by: 2)
        let answer = try await loader.load(origin.url("/r"))
        #expect(answer.source == .network && answer.body == Data("new".utf8))
        #expect(try await loader.load(origin.url("/r")).body == Data("new".utf8))
        #expect(origin.requests.count == 2)
        await loader.waitForBackgroundWork()
    }

    @Test("1,000 concurrent loads of one URL reach the origin once")
    func coalescing() async throws {
        let gate = Gate()
        let arrived = Countdown()
        let origin = try await TestOrigin.start { _ in
            arrived.increment()
            await gate.wait()
            return .init(fields: [("Cache-Control", "no-store")], body: "shared")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let url = origin.url("/popular")
        try await withThrowingTaskGroup(of: Resource.self) { group in
            for _ in 0..<1_000 { group.addTask { try await loader.load(url) } }
            await arrived.wait(for: 1)
            while loader.flights.callers < 1_000, !Task.isCancelled { await Task.yield() }
            gate.open()
            var answers = 0
            for try await resource in group {
                #expect(resource.body == Data("shared".utf8))
                answers += 1
            }
            #expect(answers == 1_000)
        }
        #expect(origin.requests.count == 1)
    }

    @Test("a caller that cancels leaves; the others still get the answer")
    func oneCallerCancels() async throws {
        let gate = Gate()
        let arrived = Countdown()
        let origin = try await TestOrigin.start { _ in
            arrived.increment()
            await gate.wait()
            return .init(fields: [("Cache-Control", "max-age=60")], body: "kept")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let url = origin.url("/slow")
        let leaving = Task { try await loader.load(url) }
        let staying = Task { try await loader.load(url) }
        await arrived.wait(for: 1)
        while loader.flights.callers < 2, !Task.isCancelled { await Task.yield() }
        leaving.cancel()
        await #expect(throws: CancellationError.self) { try await leaving.value }
        gate.open()
        #expect(try await staying.value.body == Data("kept".utf8))
        #expect(origin.requests.count == 1)
        await loader.waitForBackgroundWork()
    }

    @Test("when the last caller cancels, the request is cancelled")
    func lastCallerCancels() async throws {
        let gate = Gate()
        let arrived = Countdown()
        let origin = try await TestOrigin.start { _ in
            arrived.increment()
            await gate.wait()
            return .init(fields: [("Cache-Control", "max-age=60")], body: "late")
        }
        defer {
            gate.open()
            origin.stop()
        }
        let transport = CancellationRecordingTransport(AsyncHTTPClientTransport())
        let loader = try self.makeLoader(transport: transport)
        let only = Task { try await loader.load(origin.url("/slow")) }
        await arrived.wait(for: 1)
        only.cancel()
        await #expect(throws: CancellationError.self) { try await only.value }
        await transport.cancellations.wait(for: 1)
        #expect(loader.flights.callers == 0)
    }

    @Test("offline: the stored response whatever its age, or 504 without one, and nothing sent")
    func offline() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=1")], body: "saved") }
        defer { origin.stop() }
        let loader = try self.makeLoader(.init(policy: .returnCacheDataDontLoad))
        let missing = try await loader.load(origin.url("/saved"))
        #expect(missing.source == .generated && missing.response.status == .gatewayTimeout)
        _ = try await loader.load(origin.url("/saved"), policy: .useProtocolCachePolicy)
        self.clock.advance(by: 3_600)
        let stale = try await loader.load(origin.url("/saved"))
        #expect(stale.source == .stale(.policy) && stale.body == Data("saved".utf8))
        #expect(origin.requests.count == 1)
        // The same through only-if-cached in the request.
        var request = HTTPRequest(method: .get, url: origin.url("/other"))
        request.headerFields[.cacheControl] = "only-if-cached"
        #expect(try await loader.load(request, policy: .useProtocolCachePolicy).response.status == .gatewayTimeout)
        await loader.waitForBackgroundWork()
    }

    @Test("a body shorter than its Content-Length fails the load and is not stored")
    func truncatedBody() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=60")], body: "0123456789", truncatedAfter: 4)
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        await #expect(throws: LoadError.self) { try await loader.load(origin.url("/cut")) }
        let stored = try await loader.load(origin.url("/cut"), policy: .returnCacheDataDontLoad)
        #expect(stored.source == .generated)
    }

    @Test(
        "malformed caching headers do not crash and count as the RFC says",
        arguments: [
            [("Cache-Control", "max-age=abc"), ("Expires", "soon")],
            [("Cache-Control", "max-age=\"60"), ("Age", "-3"), ("Date", "not a date")],
            [("Expires", "0"), ("Last-Modified", "0"), ("ETag", "unquoted")],
            [("Cache-Control", ",,=,max-age==5,\"\""), ("Vary", ",")],
        ]
    )
    func malformedHeaders(fields: [(String, String)]) async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: fields, body: "x") }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        #expect(try await loader.load(origin.url("/m")).source == .network)
        // None of them gives explicit freshness: the stored response is validated (or refetched).
        #expect(try await loader.load(origin.url("/m")).source != .memory)
        #expect(origin.requests.count == 2)
    }

    @Test("stale-while-revalidate answers stale at once and revalidates once in the background")
    func staleWhileRevalidate() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=10, stale-while-revalidate=100"), ("ETag", "\"a\"")], body: "v")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        _ = try await loader.load(origin.url("/swr"))
        self.clock.advance(by: 20)
        let gate = Gate()
        origin.respond { _ in
            await gate.wait()
            return .init(
                status: 304,
                fields: [("Cache-Control", "max-age=10, stale-while-revalidate=100"), ("ETag", "\"a\"")]
            )
        }
        #expect(try await loader.load(origin.url("/swr")).source == .stale(.whileRevalidating))
        #expect(try await loader.load(origin.url("/swr")).source == .stale(.whileRevalidating))
        gate.open()
        await loader.waitForBackgroundWork()
        #expect(try await loader.load(origin.url("/swr")).source == .memory)
        #expect(origin.requests.count == 2)
        #expect(loader.statistics.staleAnswers == 2)
    }

    @Test("stale-if-error answers stale when the origin answers 5xx or cannot be reached")
    func staleIfError() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=10, stale-if-error=100")], body: "safe")
        }
        defer { origin.stop() }
        // AsyncHTTPClient retries a refused connection until its deadline; a transport that
        // fails at once stands for an unreachable origin.
        let transport = SwitchableTransport(AsyncHTTPClientTransport())
        let loader = try self.makeLoader(transport: transport)
        _ = try await loader.load(origin.url("/e"))
        self.clock.advance(by: 20)
        origin.respond { _ in .init(status: 503, body: "down") }
        let served = try await loader.load(origin.url("/e"))
        #expect(served.source == .stale(.originError) && served.body == Data("safe".utf8))
        transport.isUnreachable.withLock { $0 = true }
        let unreachable = try await loader.load(origin.url("/e"))
        #expect(unreachable.source == .stale(.originError))
        self.clock.advance(by: 200)
        await #expect(throws: LoadError.self) { try await loader.load(origin.url("/e")) }
        transport.isUnreachable.withLock { $0 = false }
        let failed = try await loader.load(origin.url("/e"))
        #expect(failed.source == .network && failed.response.status.code == 503)
    }

    @Test("a successful POST invalidates the stored response for its URL")
    func invalidation() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "1") }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        _ = try await loader.load(origin.url("/item"))
        #expect(try await loader.load(origin.url("/item")).source == .memory)
        let post = try await loader.load(HTTPRequest(method: .post, url: origin.url("/item")), body: Data("x".utf8))
        #expect(post.source == .network)
        #expect(try await loader.load(origin.url("/item")).source == .network)
        #expect(origin.requests.map(\.method) == [.get, .post, .get])
        await loader.waitForBackgroundWork()
    }

    @Test("Vary: each value of the named field has its own stored variant")
    func variants() async throws {
        let origin = try await TestOrigin.start { request in
            .init(
                fields: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                body: request.headerFields[.acceptLanguage] ?? "none"
            )
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        func load(_ language: String) async throws -> Resource {
            var request = HTTPRequest(method: .get, url: origin.url("/hello"))
            request.headerFields[.acceptLanguage] = language
            return try await loader.load(request)
        }
        #expect(try await load("fr").body == Data("fr".utf8))
        #expect(try await load("de").body == Data("de".utf8))
        let french = try await load("fr")
        #expect(french.source == .memory && french.body == Data("fr".utf8))
        await loader.waitForBackgroundWork()
        let german = try await self.makeLoader().load(
            HTTPRequest(method: .get, url: origin.url("/hello"), headerFields: [.acceptLanguage: "de"])
        )
        #expect(german.source == .disk && german.body == Data("de".utf8))
        #expect(origin.requests.count == 2)
    }

    @Test("a key transform lets URLs with rotating tokens share an entry")
    func keyTransform() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "img") }
        defer { origin.stop() }
        let loader = try self.makeLoader(
            .init(keyTransform: { url in String(url.prefix { $0 != "?" }) })
        )
        _ = try await loader.load(origin.url("/img.png?token=1"))
        #expect(try await loader.load(origin.url("/img.png?token=2")).source == .memory)
        #expect(origin.requests.count == 1)
        await loader.waitForBackgroundWork()
    }

    @Test("progress reports the bytes received against Content-Length")
    func progress() async throws {
        let body = String(repeating: "z", count: 300_000)
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "no-store")], body: body) }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let reports = Mutex<[LoadProgress]>([])
        _ = try await loader.load(
            origin.url("/big"),
            progress: { progress in reports.withLock { $0.append(progress) } }
        )
        let seen = reports.withLock { $0 }
        #expect(seen.last == LoadProgress(received: 300_000, expected: 300_000))
        #expect(seen.map(\.received) == seen.map(\.received).sorted())
    }

    @Test("requests beyond the per-host limit wait by priority; a cached answer does not wait")
    func hostLimit() async throws {
        let gate = Gate()
        let arrived = Countdown()
        let origin = try await TestOrigin.start { request in
            arrived.increment()
            if request.path != "/cached" { await gate.wait() }
            return .init(fields: [("Cache-Control", "max-age=60")], body: request.path ?? "")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader(.init(maximumConnectionsPerHost: 1))
        _ = try await loader.load(origin.url("/cached"))
        let blocker = Task { try await loader.load(origin.url("/blocker")) }
        await arrived.wait(for: 2)
        let low = Task { try await loader.load(origin.url("/low"), priority: .low) }
        while loader.hosts.waiting(for: "127.0.0.1:\(origin.port)") < 1, !Task.isCancelled { await Task.yield() }
        let high = Task { try await loader.load(origin.url("/high"), priority: .high) }
        while loader.hosts.waiting(for: "127.0.0.1:\(origin.port)") < 2, !Task.isCancelled { await Task.yield() }
        // While the only slot is taken and two wait, a fresh stored answer comes at once.
        #expect(try await loader.load(origin.url("/cached")).source == .memory)
        gate.open()
        _ = try await (blocker.value, low.value, high.value)
        #expect(origin.requests.map(\.path) == ["/cached", "/blocker", "/high", "/low"])
        await loader.waitForBackgroundWork()
    }

    @Test("a response that cannot be stored is answered all the same, and counted")
    func storageFailure() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "kept?") }
        defer { origin.stop() }
        let loader = try ResourceLoader(
            configuration: .init(memoryCostLimit: 0),
            transport: AsyncHTTPClientTransport(),
            disk: FullDisk()
        )
        let resource = try await loader.load(origin.url("/x"))
        await loader.waitForBackgroundWork()
        #expect(resource.body == Data("kept?".utf8) && resource.source == .network)
        #expect(loader.statistics.storageFailures == 1)
    }

    @Test("statistics are reported through swift-metrics too")
    func metrics() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "m") }
        defer { origin.stop() }
        let metrics = TestMetrics()
        let loader = try self.makeLoader(.init(metrics: MetricsConfiguration(label: "loader", factory: metrics)))
        _ = try await loader.load(origin.url("/x"))
        _ = try await loader.load(origin.url("/x"))
        #expect(try metrics.expectCounter("loader.requests").totalValue == 2)
        #expect(try metrics.expectCounter("loader.misses").totalValue == 1)
        #expect(try metrics.expectCounter("loader.hits", [("tier", "memory")]).totalValue == 1)
        #expect(try metrics.expectCounter("loader.bytes", [("source", "network")]).totalValue == 1)
        await loader.waitForBackgroundWork()
    }
}

/// A disk tier whose every write fails as a full disk does.
struct FullDisk: DataCaching {
    func entry(forKey key: String) throws(CacheError) -> DataCacheEntry? { nil }
    func contains(_ key: String) throws(CacheError) -> Bool { false }
    func set(_ data: Data, forKey key: String, metadata: Data) throws(CacheError) {
        throw CacheError(.outOfSpace, "No space left on device.")
    }
    func removeValue(forKey key: String) throws(CacheError) -> Bool { false }
    func removeAll() throws(CacheError) {}
}

/// A transport that counts the sends that ended because their task was cancelled.
struct CancellationRecordingTransport: HTTPTransport {
    let base: any HTTPTransport
    let cancellations = Countdown()

    init(_ base: any HTTPTransport) {
        self.base = base
    }

    func send(_ request: HTTPRequest, body: Data?) async throws -> HTTPTransportResponse {
        do {
            let response = try await self.base.send(request, body: body)
            if Task.isCancelled { self.cancellations.increment() }
            return response
        } catch {
            if Task.isCancelled { self.cancellations.increment() }
            throw error
        }
    }
}

/// A transport that fails at once, as for an unreachable origin, while `isUnreachable` is set.
final class SwitchableTransport: HTTPTransport {
    struct Unreachable: Error {}

    let base: any HTTPTransport
    let isUnreachable = Mutex(false)

    init(_ base: any HTTPTransport) {
        self.base = base
    }

    func send(_ request: HTTPRequest, body: Data?) async throws -> HTTPTransportResponse {
        if self.isUnreachable.withLock({ $0 }) { throw Unreachable() }
        return try await self.base.send(request, body: body)
    }
}
