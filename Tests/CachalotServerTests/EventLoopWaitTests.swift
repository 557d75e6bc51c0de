import CachalotImages
import CachalotServer
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import NIOHTTP1
import NIOPosix
import Synchronization
import Testing

@testable import Cachalot

/// A connection's task runs on its event loop (``EventLoopExecutor``), so that a miss crosses no
/// thread; nothing there may wait on a file. These tests watch every call the loader makes to the
/// disk tier while the proxy answers misses, hits from disk, ranges, large bodies written as
/// they arrive, revalidations, invalidations and purges, and fail if one was made on a loop:
/// all but ``DataCaching/mayContain(_:)``, which never waits, and by which a loop decides a miss.
@Suite("The proxy never waits on the disk tier on an event loop")
struct EventLoopWaitTests {
    @Test(
        "Misses, disk hits, ranges, streamed bodies, revalidations, invalidations and purges call the disk off the loops"
    )
    func diskCallsOffTheLoops() async throws {
        let large = Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let origin = try await TestOrigin.start { request in
            switch request.path ?? "" {
            case "/large": .init(fields: [("Cache-Control", "max-age=60")], data: large)
            case "/stale": .init(fields: [("Cache-Control", "max-age=0"), ("ETag", "\"v1\"")], body: "stale")
            default: .init(fields: [("Cache-Control", "max-age=60"), ("ETag", "\"a\"")], body: "small body")
            }
        }
        let watch = DiskWatch()
        // No memory tier (the harness's default): every hit is read from disk. A body over 1,000
        // bytes goes to its entry's file as it arrives.
        let proxy = try await ProxyHarness(origin: origin, streamingThreshold: 1_000, diskWatch: watch)
        #expect(try await proxy.send("/a").cacheStatus.contains("stored"))
        #expect(try await proxy.send("/a").cacheStatus.hasPrefix("cachalot; hit"))
        let range = try await proxy.send("/a", headers: [("Range", "bytes=0-4")])
        #expect(range.status == 206)
        #expect(range.text == "small")
        #expect(try await proxy.send("/large").body == large)
        let largeHit = try await proxy.send("/large")
        #expect(largeHit.body == large)
        #expect(largeHit.cacheStatus.hasPrefix("cachalot; hit"))
        #expect(try await proxy.send("/stale").text == "stale")
        #expect(try await proxy.send("/stale").text == "stale")
        #expect(try await proxy.send("/a", method: .POST, body: Data("x".utf8)).status == 200)
        #expect(try await proxy.send("/a").cacheStatus.contains("fwd=uri-miss"))
        let purge = try await proxy.send("/purge?url=/large", method: .POST, admin: true)
        #expect(purge.status == 200)
        try await proxy.stop()

        let (calls, onLoop) = watch.counts
        // Each kind of call was made: lookups, whole writes, streamed writes, removals.
        #expect(Set(calls.keys).isSuperset(of: ["entry", "set", "makeEntryWriter", "append", "commit", "removeValue"]))
        #expect(Set(onLoop.keys) == ["mayContain"], "disk calls made on an event loop: \(onLoop)")
    }

    @Test("The image endpoint reads and writes its variants, and the loader its originals, off the loops")
    func imageWorkOffTheLoops() async throws {
        let origin = try await ImageEndpointTests.origin()
        let (loaderWatch, variantsWatch) = (DiskWatch(), DiskWatch())
        let directory = try TemporaryDirectory()
        let endpoint = ImageEndpoint(
            signing: .key(ImageEndpointTests.key),
            variants: WatchedDisk(
                disk: try DiskCache(directory: directory.url.appending(path: "variants")),
                watch: variantsWatch
            ),
            maximumSourceSize: 1 << 20,
            maximumPixelCount: 1_000_000
        )
        let proxy = try await ProxyHarness(origin: origin, diskWatch: loaderWatch) { $0.images = endpoint }
        let path = endpoint.path(for: "/photo.jpg", options: "w64,h64")
        let made = try await proxy.send(path, headers: [("Accept", "image/webp")])
        #expect(made.status == 200)
        let hit = try await proxy.send(path, headers: [("Accept", "image/webp")])
        #expect(hit.body == made.body)
        try await proxy.stop()

        #expect(loaderWatch.counts.calls["set"] != nil)
        #expect(Set(variantsWatch.counts.calls.keys).isSuperset(of: ["entry", "set"]))
        #expect(loaderWatch.counts.onLoop.isEmpty, "the originals' disk calls on an event loop")
        #expect(variantsWatch.counts.onLoop.isEmpty, "the variants' disk calls on an event loop")
    }
}

/// Counts the calls made to a disk tier, by name, and those made on an event loop.
final class DiskWatch: Sendable {
    private let state = Mutex<(calls: [String: Int], onLoop: [String: Int])>(([:], [:]))

    func record(_ call: String) {
        let isOnLoop = MultiThreadedEventLoopGroup.currentEventLoop != nil
        self.state.withLock { state in
            state.calls[call, default: 0] += 1
            if isOnLoop { state.onLoop[call, default: 0] += 1 }
        }
    }

    var counts: (calls: [String: Int], onLoop: [String: Int]) { self.state.withLock { $0 } }
}

/// A ``DiskCache`` whose every call, and every call to the writers it makes, is told to a
/// ``DiskWatch`` first.
struct WatchedDisk: StreamingDataCaching, EnumerableDataCaching {
    let disk: DiskCache
    let watch: DiskWatch

    func entry(forKey key: String) throws(CacheError) -> DataCacheEntry? {
        self.watch.record("entry")
        return try self.disk.entry(forKey: key)
    }

    func contains(_ key: String) throws(CacheError) -> Bool {
        self.watch.record("contains")
        return try self.disk.contains(key)
    }

    func mayContain(_ key: String) -> Bool {
        self.watch.record("mayContain")
        return self.disk.mayContain(key)
    }

    func set(_ data: Data, forKey key: String, metadata: Data) throws(CacheError) {
        self.watch.record("set")
        try self.disk.set(data, forKey: key, metadata: metadata)
    }

    func removeValue(forKey key: String) throws(CacheError) -> Bool {
        self.watch.record("removeValue")
        return try self.disk.removeValue(forKey: key)
    }

    func removeAll() throws(CacheError) {
        self.watch.record("removeAll")
        try self.disk.removeAll()
    }

    func entries() throws(CacheError) -> [DiskCache.EntryInfo] {
        self.watch.record("entries")
        return try self.disk.entries()
    }

    func metadata(forKey key: String) throws(CacheError) -> (metadata: Data, bodySize: Int)? {
        self.watch.record("metadata")
        return try self.disk.metadata(forKey: key)
    }

    func removeEntries(createdBefore date: Date) throws(CacheError) -> Int {
        self.watch.record("removeEntries")
        return try self.disk.removeEntries(createdBefore: date)
    }

    func makeEntryWriter(forKey key: String, metadata: Data) throws(CacheError) -> any DataCacheWriting {
        self.watch.record("makeEntryWriter")
        return Writer(writer: try self.disk.makeEntryWriter(forKey: key, metadata: metadata), watch: self.watch)
    }

    final class Writer: DataCacheWriting {
        let writer: any DataCacheWriting
        let watch: DiskWatch

        init(writer: any DataCacheWriting, watch: DiskWatch) {
            self.writer = writer
            self.watch = watch
        }

        func append(_ chunk: Data) throws(CacheError) {
            self.watch.record("append")
            try self.writer.append(chunk)
        }

        func commit() throws(CacheError) {
            self.watch.record("commit")
            try self.writer.commit()
        }

        func mappedBody() throws(CacheError) -> Data {
            self.watch.record("mappedBody")
            return try self.writer.mappedBody()
        }

        func discard() {
            self.watch.record("discard")
            self.writer.discard()
        }
    }
}
