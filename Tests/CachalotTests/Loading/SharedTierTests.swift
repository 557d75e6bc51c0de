import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing

@testable import Cachalot

/// How the loader composes its tiers: memory, disk, then the shared tiers in order. The shared
/// tiers here are in memory and count what they are asked; `CachalotPostgresTests` runs the same
/// composition on PostgreSQL.
@Suite("Shared tiers under memory and disk", .timeLimit(.minutes(1)))
struct SharedTierTests {
    let clock = ManualWallClock()
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func makeLoader(
        disk name: String,
        shared: [any AsyncDataCaching],
        memory: Bool = true
    ) throws -> ResourceLoader {
        let clock = self.clock
        return try ResourceLoader(
            configuration: .init(memoryCostLimit: memory ? nil : 0),
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: self.directory.url.appending(path: name), now: { clock.now }),
            shared: shared,
            now: { clock.now }
        )
    }

    @Test("memory and disk hits never ask the shared tier; a miss asks it, then the origin")
    func hitsNeverWaitForTheSharedTier() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "hello") }
        defer { origin.stop() }
        let shared = CountingStore()
        let loader = try self.makeLoader(disk: "a", shared: [shared])
        #expect(try await loader.load(origin.url("/x")).source == .network)
        #expect(shared.reads == 1)
        #expect(try await loader.load(origin.url("/x")).source == .memory)
        await loader.waitForBackgroundWork()
        let fromDisk = try self.makeLoader(disk: "a", shared: [shared])
        #expect(try await fromDisk.load(origin.url("/x")).source == .disk)
        #expect(shared.reads == 1)
        #expect(origin.requests.count == 1)
        await fromDisk.waitForBackgroundWork()
    }

    @Test("identical misses that ask the shared tier at once make one read of it, not one each")
    func sharedReadsCoalesce() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "hello") }
        defer { origin.stop() }
        let gate = Gate()
        let shared = CountingStore(gate: gate)
        let loader = try self.makeLoader(disk: "a", shared: [shared])
        let url = origin.url("/x")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    let stream = try await loader.stream(HTTPRequest(method: .get, url: url))
                    #expect(stream.response.status.code == 200)
                }
            }
            // One load reads the shared tier; the seven others wait for its read (or, if reads
            // were not shared, all eight read).
            while loader.tiers.sharedReads.waiters(for: "0 " + url.absoluteString) < 7, shared.reads < 8 {
                await Task.yield()
            }
            gate.open()
            try await group.waitForAll()
        }
        #expect(shared.reads == 1)
        await loader.waitForBackgroundWork()
    }

    @Test("a hit in a lower tier is promoted to every tier above it, and a response reaches them all")
    func promotionAndWrites() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "hello") }
        defer { origin.stop() }
        let (upper, lower) = (CountingStore(), CountingStore())
        let first = try self.makeLoader(disk: "first", shared: [upper, lower])
        _ = try await first.load(origin.url("/x"))
        await first.waitForBackgroundWork()
        #expect(upper.keys == [origin.url("/x").absoluteString] && lower.keys == upper.keys)

        // Only the lowest tier has it now: a loader with a new disk finds it there.
        try upper.removeAll()
        let second = try self.makeLoader(disk: "second", shared: [upper, lower])
        let answer = try await second.load(origin.url("/x"))
        #expect(answer.source == .shared)
        #expect(answer.body == Data("hello".utf8))
        #expect(try await second.load(origin.url("/x")).source == .memory)
        await second.waitForBackgroundWork()
        #expect(upper.keys == lower.keys)
        #expect(try await self.makeLoader(disk: "second", shared: []).load(origin.url("/x")).source == .disk)
        #expect(origin.requests.count == 1)
        #expect(second.statistics.sharedHits == 1 && second.statistics.sharedLookups == 1)
    }

    @Test("only-if-cached and returnCacheDataDontLoad answer from the shared tier too, else 504")
    func storedOnly() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "hello") }
        defer { origin.stop() }
        let shared = CountingStore()
        let first = try self.makeLoader(disk: "first", shared: [shared])
        _ = try await first.load(origin.url("/x"))
        await first.waitForBackgroundWork()
        let offline = try self.makeLoader(disk: "second", shared: [shared])
        let answer = try await offline.load(origin.url("/x"), policy: .returnCacheDataDontLoad)
        #expect(answer.source == .shared && answer.body == Data("hello".utf8))
        let missing = try await offline.stream(
            HTTPRequest(method: .get, url: origin.url("/y"), headerFields: [.cacheControl: "only-if-cached"])
        )
        #expect(missing.source == .generated && missing.response.status == .gatewayTimeout)
        let third = try self.makeLoader(disk: "third", shared: [shared])
        let streamed = try await third.stream(
            HTTPRequest(method: .get, url: origin.url("/x"), headerFields: [.cacheControl: "only-if-cached"])
        )
        #expect(streamed.source == .shared)
        #expect(origin.requests.count == 1)
        await offline.waitForBackgroundWork()
        await third.waitForBackgroundWork()
    }

    @Test("a failing shared tier is a miss: the next tier, then the origin, answers")
    func failingTierIsAMiss() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "hello") }
        defer { origin.stop() }
        let (failing, working) = (CountingStore(), CountingStore())
        failing.isFailing = true
        let first = try self.makeLoader(disk: "first", shared: [failing, working])
        #expect(try await first.load(origin.url("/x")).source == .network)
        await first.waitForBackgroundWork()
        let second = try self.makeLoader(disk: "second", shared: [failing, working])
        #expect(try await second.load(origin.url("/x")).source == .shared)
        await second.waitForBackgroundWork()
        #expect(origin.requests.count == 1)
    }

    @Test("a stale response from the shared tier is validated, not fetched again")
    func staleSharedResponseIsValidated() async throws {
        let origin = try await TestOrigin.start { request in
            if request.headerFields[.ifNoneMatch] == "\"v1\"" {
                return .init(status: 304, fields: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")])
            }
            return .init(fields: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")], body: "hello")
        }
        defer { origin.stop() }
        let shared = CountingStore()
        let first = try self.makeLoader(disk: "first", shared: [shared])
        _ = try await first.load(origin.url("/x"))
        await first.waitForBackgroundWork()
        self.clock.advance(by: 120)
        let second = try self.makeLoader(disk: "second", shared: [shared])
        let answer = try await second.load(origin.url("/x"))
        #expect(answer.source == .revalidated)
        #expect(answer.body == Data("hello".utf8))
        #expect(origin.requests.last?.headerFields[.ifNoneMatch] == "\"v1\"")
        await second.waitForBackgroundWork()
    }

    @Test("an unsafe method and a purge remove the URL from the shared tier too")
    func invalidationsReachTheSharedTier() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "hello") }
        defer { origin.stop() }
        let shared = CountingStore()
        let loader = try self.makeLoader(disk: "a", shared: [shared])
        _ = try await loader.load(origin.url("/posted"))
        _ = try await loader.load(origin.url("/purged"))
        await loader.waitForBackgroundWork()
        #expect(shared.keys.count == 2)
        _ = try await loader.load(HTTPRequest(method: .post, url: origin.url("/posted")))
        #expect(shared.keys == [origin.url("/purged").absoluteString])
        // One entry in each tier: memory, disk and the shared one.
        #expect(try await loader.removeResponses(for: origin.url("/purged")) == 3)
        #expect(shared.keys.isEmpty)
        await loader.waitForBackgroundWork()
    }
}

/// A shared tier in memory that counts reads, and fails every call while `isFailing`.
final class CountingStore: AsyncDataCaching {
    private struct State {
        var entries: [String: DataCacheEntry] = [:]
        var reads = 0
        var isFailing = false
    }

    private let state = Mutex(State())
    /// Holds every read until it opens, if there is one.
    private let gate: Gate?

    init(gate: Gate? = nil) {
        self.gate = gate
    }

    var reads: Int { self.state.withLock { $0.reads } }
    var keys: [String] { self.state.withLock { $0.entries.keys.sorted() } }
    var isFailing: Bool {
        get { self.state.withLock { $0.isFailing } }
        set { self.state.withLock { $0.isFailing = newValue } }
    }

    private func withState<Result>(_ body: (inout State) -> Result) throws(CacheError) -> Result {
        let result: Result? = self.state.withLock { state in state.isFailing ? nil : body(&state) }
        guard let result else { throw CacheError(.unavailable, "failing on purpose") }
        return result
    }

    func entry(forKey key: String) async throws(CacheError) -> DataCacheEntry? {
        self.state.withLock { $0.reads += 1 }
        await self.gate?.wait()
        return try self.withState { $0.entries[key] }
    }

    func set(_ data: Data, forKey key: String, metadata: Data) async throws(CacheError) {
        try self.withState {
            $0.entries[key] = DataCacheEntry(key: key, data: data, metadata: metadata, created: Date())
        }
    }

    func removeValue(forKey key: String) async throws(CacheError) -> Bool {
        try self.withState { $0.entries.removeValue(forKey: key) != nil }
    }

    func removeValues(
        where isRemoved: @escaping @Sendable (String, Data) -> Bool
    ) async throws(CacheError) -> Int {
        try self.withState { state in
            let doomed = state.entries.values.filter { isRemoved($0.key, $0.metadata) }.map(\.key)
            for key in doomed { state.entries.removeValue(forKey: key) }
            return doomed.count
        }
    }

    func removeAll() throws(CacheError) {
        try self.withState { $0.entries.removeAll() }
    }
}
