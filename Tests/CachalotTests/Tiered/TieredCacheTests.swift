import CachalotTesting
import Foundation
import Testing

@testable import Cachalot

@Suite("TieredCache")
struct TieredCacheTests {
    struct Refused: Error {}

    /// Strings as UTF-8; a value or stored bytes containing "bad" fail to encode or decode.
    static let codec = TieredCache<String>.Codec(
        encode: { value in
            if value.contains("bad") { throw Refused() }
            return Data(value.utf8)
        },
        decode: { data in
            let value = String(decoding: data, as: UTF8.self)
            if value.contains("bad") { throw Refused() }
            return value
        },
        cost: { $0.utf8.count }
    )

    func makeCache(disk: any DataCaching = InMemoryDataCache()) throws -> TieredCache<String> {
        TieredCache(memory: try MemoryCache(configuration: .init(costLimit: 1 << 20)), disk: disk, codec: Self.codec)
    }

    @Test("a set reaches both tiers, and a disk hit is promoted to memory")
    func promotion() throws {
        let cache = try self.makeCache()
        try cache.set("hello", forKey: "k", metadata: Data("m".utf8))
        #expect(cache.memory.value(forKey: "k") == "hello")
        #expect(try cache.disk.entry(forKey: "k")?.metadata == Data("m".utf8))
        cache.memory.removeAll()
        #expect(try cache.value(forKey: "k") == "hello")
        #expect(cache.memory.contains("k"))
    }

    @Test("the tiers work over a real disk cache, across a new memory tier")
    func overDiskCache() throws {
        let directory = try TemporaryDirectory()
        try self.makeCache(disk: DiskCache(directory: directory.url)).set("persisted", forKey: "k")
        let reopened = try self.makeCache(disk: DiskCache(directory: directory.url))
        #expect(try reopened.value(forKey: "k") == "persisted")
    }

    @Test("a removal reaches both tiers")
    func removal() throws {
        let cache = try self.makeCache()
        try cache.set("a", forKey: "a")
        try cache.set("b", forKey: "b")
        try cache.removeValue(forKey: "a")
        #expect(try cache.value(forKey: "a") == nil)
        #expect(try !cache.disk.contains("a"))
        try cache.removeAll()
        #expect(try cache.value(forKey: "b") == nil)
        #expect(cache.memory.count == 0)
    }

    @Test("stored bytes the codec cannot decode read as no value and are removed")
    func undecodableBytes() throws {
        let cache = try self.makeCache()
        try cache.disk.set(Data("bad bytes".utf8), forKey: "k")
        #expect(try cache.value(forKey: "k") == nil)
        #expect(try !cache.disk.contains("k"))
    }

    @Test("a value the codec cannot encode is an error, and neither tier changes")
    func unencodableValue() throws {
        let cache = try self.makeCache()
        try cache.set("good", forKey: "k")
        #expect {
            try cache.set("bad", forKey: "k")
        } throws: { error in
            (error as? CacheError)?.code == .invalidArgument
        }
        #expect(try cache.value(forKey: "k") == "good")
        #expect(try cache.disk.data(forKey: "k") == Data("good".utf8))
    }
}
