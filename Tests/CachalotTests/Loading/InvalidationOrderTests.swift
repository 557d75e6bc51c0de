import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Dispatch
import Foundation
import HTTPTypes
import Synchronization
import Testing

@testable import Cachalot

/// An invalidation or a purge that comes while the response it removes is still on its way to
/// the disk or a shared tier must not be undone when that write lands.
@Suite("Invalidations and purges after writes still in flight", .timeLimit(.minutes(1)))
struct InvalidationOrderTests {
    @Test("a POST while the GET's disk write is held removes the entry after that write, not before")
    func diskWriteInFlight() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "1") }
        defer { origin.stop() }
        let disk = HeldDisk()
        let loader = try ResourceLoader(transport: AsyncHTTPClientTransport(), disk: disk)
        _ = try await loader.load(origin.url("/item"))
        await disk.setsReached.wait(for: 1)
        let post = Task { try await loader.load(HTTPRequest(method: .post, url: origin.url("/item"))) }
        // Either the removal reaches the disk now (before the held write: the bug), or the loader
        // queues it behind that write and waits.
        for _ in 0..<1_000_000 where disk.removals == 0 && loader.tiers.writes.waiterCount == 0 {
            await Task.yield()
        }
        disk.release()
        _ = try await post.value
        await loader.waitForBackgroundWork()
        #expect(try await loader.load(origin.url("/item")).source == .network)
        await loader.waitForBackgroundWork()
    }

    @Test(
        "a POST or a purge while the GET's shared write is in flight removes the entry after that write",
        arguments: ["POST", "purge"]
    )
    func sharedWriteInFlight(removal: String) async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "1") }
        defer { origin.stop() }
        let shared = HeldSharedStore()
        let loader = try ResourceLoader(transport: AsyncHTTPClientTransport(), shared: [shared])
        _ = try await loader.load(origin.url("/item"))
        await shared.setsReached.wait(for: 1)
        let removing = Task {
            if removal == "POST" {
                _ = try await loader.load(HTTPRequest(method: .post, url: origin.url("/item")))
            } else {
                _ = try await loader.removeResponses(for: origin.url("/item"))
            }
        }
        for _ in 0..<1_000_000 where shared.removals == 0 && loader.tiers.sharedWrites.waiterCount == 0 {
            await Task.yield()
        }
        shared.gate.open()
        try await removing.value
        await loader.waitForBackgroundWork()
        #expect(shared.isEmpty)
    }
}

/// A disk tier in memory whose first write is held until ``release()``, and that counts removals.
final class HeldDisk: DataCaching {
    let setsReached = Countdown()
    private let held = DispatchSemaphore(value: 0)
    private let store = InMemoryDataCache()
    private let counts = Mutex((sets: 0, removals: 0))

    var removals: Int { self.counts.withLock { $0.removals } }

    func release() { self.held.signal() }

    func entry(forKey key: String) throws(CacheError) -> DataCacheEntry? { try self.store.entry(forKey: key) }
    func contains(_ key: String) throws(CacheError) -> Bool { try self.store.contains(key) }

    func set(_ data: Data, forKey key: String, metadata: Data) throws(CacheError) {
        let isFirst = self.counts.withLock { counts in
            counts.sets += 1
            return counts.sets == 1
        }
        if isFirst {
            self.setsReached.increment()
            self.held.wait()
        }
        try self.store.set(data, forKey: key, metadata: metadata)
    }

    func removeValue(forKey key: String) throws(CacheError) -> Bool {
        self.counts.withLock { $0.removals += 1 }
        return try self.store.removeValue(forKey: key)
    }

    func removeAll() throws(CacheError) { try self.store.removeAll() }
}

/// A shared tier in memory whose writes wait for ``gate``, and that counts removals.
final class HeldSharedStore: AsyncDataCaching {
    let setsReached = Countdown()
    let gate = Gate()
    private let state = Mutex((entries: [String: DataCacheEntry](), removals: 0))

    var removals: Int { self.state.withLock { $0.removals } }
    var isEmpty: Bool { self.state.withLock { $0.entries.isEmpty } }

    func entry(forKey key: String) async throws(CacheError) -> DataCacheEntry? {
        self.state.withLock { $0.entries[key] }
    }

    func set(_ data: Data, forKey key: String, metadata: Data) async throws(CacheError) {
        self.setsReached.increment()
        await self.gate.wait()
        let entry = DataCacheEntry(key: key, data: data, metadata: metadata, created: Date())
        self.state.withLock { $0.entries[key] = entry }
    }

    func removeValue(forKey key: String) async throws(CacheError) -> Bool {
        self.state.withLock { state in
            state.removals += 1
            return state.entries.removeValue(forKey: key) != nil
        }
    }

    func removeValues(where isRemoved: @escaping @Sendable (String, Data) -> Bool) async throws(CacheError) -> Int {
        self.state.withLock { state in
            state.removals += 1
            let doomed = state.entries.values.filter { isRemoved($0.key, $0.metadata) }.map(\.key)
            for key in doomed { state.entries.removeValue(forKey: key) }
            return doomed.count
        }
    }

    func removeAll() async throws(CacheError) {
        self.state.withLock { $0.entries.removeAll() }
    }
}
