import CachalotTesting
import Foundation
import Testing

@testable import Cachalot

/// A real full or read-only disk: a small tmpfs, which needs root to mount (CI runs as root).
@Suite("DiskCache on a full or read-only disk", .enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
struct DiskCacheFullDiskTests {
    /// A tmpfs of `size` mounted in a new temporary directory, unmounted by `body`'s end.
    static func withTmpfs(size: String, _ body: (Tmpfs) throws -> Void) throws {
        let directory = try TemporaryDirectory()
        let disk = try Tmpfs(at: directory.path + "/tiny", size: size)
        defer { disk.unmount() }
        try body(disk)
    }

    @Test(
        "trim, purge and clear free space on a disk so full that not even the journal can grow",
        arguments: ["trim", "purge", "clear"]
    )
    func freeingSpaceOnAFullDisk(operation: String) throws {
        try Self.withTmpfs(size: "2m") { disk in
            let mountPoint = URL(fileURLWithPath: disk.path)
            let cache = try DiskCache(
                directory: mountPoint.appendingPathComponent("cache"),
                configuration: .init(sizeLimit: 64 << 20)
            )
            // 200 entries: removing them all takes an intent of 200 digests, more than a page.
            for index in 0..<200 { try cache.set(Data([UInt8(index)]), forKey: "entry-\(index)") }
            try disk.fill()
            #expect(throws: CacheError.self) { try cache.set(Data(count: 10_000), forKey: "more") }
            switch operation {
            case "trim": #expect(try cache.trim(toSize: 0) == 200)
            case "purge": #expect(try cache.removeEntries(createdBefore: .distantFuture) == 200)
            default: try cache.removeAll()
            }
            #expect(try cache.count == 0)
            #expect(try cache.totalSize == 0)
            // The space is free again, and the cache works.
            try cache.set(Data(count: 10_000), forKey: "after")
            #expect(try cache.data(forKey: "after") == Data(count: 10_000))
        }
    }

    @Test("an intent a dead writer left open does not stop a full disk from being freed; it is settled after")
    func openIntentOnAFullDisk() throws {
        try Self.withTmpfs(size: "2m") { disk in
            let directory = URL(fileURLWithPath: disk.path + "/cache")
            do {
                let cache = try DiskCache(directory: directory, configuration: .init(sizeLimit: 64 << 20))
                for index in 0..<200 { try cache.set(Data([UInt8(index)]), forKey: "entry-\(index)") }
            }
            // A writer announced a change of "entry-0" and died before recording it.
            var journal = try Journal(path: directory.path + "/journal")
            _ = try journal.readNew()
            try journal.append([.intent([KeyDigest(key: "entry-0")])])
            journal.close()
            try disk.fill()
            let cache = try DiskCache(directory: directory, configuration: .init(sizeLimit: 64 << 20))
            #expect(try cache.trim(toSize: 0) == 200)
            try cache.set(Data("after".utf8), forKey: "entry-0")
            #expect(try cache.count == 1)
            #expect(try DiskCache(directory: directory).data(forKey: "entry-0") == Data("after".utf8))
        }
    }

    @Test("a read-only cache is read as it is: gets and listings work, changes fail clearly")
    func readOnlyCache() throws {
        try Self.withTmpfs(size: "1m") { disk in
            let mountPoint = URL(fileURLWithPath: disk.path)
            let directory = mountPoint.appendingPathComponent("cache")
            do {
                let cache = try DiskCache(directory: directory)
                for index in 0..<3 { try cache.set(Data("body \(index)".utf8), forKey: "key-\(index)") }
            }
            try disk.remountReadOnly()
            let cache = try DiskCache(directory: directory)
            for index in 0..<3 { #expect(try cache.data(forKey: "key-\(index)") == Data("body \(index)".utf8)) }
            #expect(try cache.count == 3)
            #expect(try cache.entries().count == 3)
            #expect {
                try cache.set(Data("new".utf8), forKey: "key-3")
            } throws: { error in
                (error as? CacheError)?.errno == EROFS
            }
            let changes: [(String, () throws -> Void)] = [
                ("removeAll", { try cache.removeAll() }), ("removeValue", { try cache.removeValue(forKey: "key-0") }),
                ("trim", { try cache.trim(toSize: 0) }), ("sweep", { try cache.sweep() }),
                ("purge", { try cache.removeEntries(createdBefore: .distantFuture) }),
            ]
            for (name, change) in changes {
                #expect(throws: CacheError.self, "\(name)") { try change() }
                #expect {
                    try change()
                } throws: { error in
                    (error as? CacheError)?.message.contains(
                        "journal is \(directory.path)/journal: Read-only file system"
                    )
                        == true
                }
            }
            #expect(try cache.count == 3)
            #expect(try cache.data(forKey: "key-0") == Data("body 0".utf8))
        }
    }

    @Test("a write that runs out of space fails clearly, leaves nothing behind, and reads keep working")
    func outOfSpace() throws {
        try Self.withTmpfs(size: "512k") { disk in
            let mountPoint = URL(fileURLWithPath: disk.path)
            let cache = try DiskCache(
                directory: mountPoint.appendingPathComponent("cache"),
                configuration: .init(sizeLimit: 64 << 20)
            )
            for index in 0..<10 {
                try cache.set(Data(repeating: UInt8(index), count: 10_000), forKey: "small-\(index)")
            }
            let (count, size) = (try cache.count, try cache.totalSize)

            #expect {
                try cache.set(Data(count: 1 << 20), forKey: "too-big")
            } throws: { error in
                let error = error as? CacheError
                return error?.code == .outOfSpace && error?.message.contains("Free some disk space") == true
            }
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: mountPoint.path + "/cache/tmp")
            #expect(leftovers.isEmpty)
            #expect(try cache.data(forKey: "too-big") == nil)
            #expect(try cache.count == count)
            #expect(try cache.totalSize == size)
            for index in 0..<10 {
                #expect(try cache.data(forKey: "small-\(index)") == Data(repeating: UInt8(index), count: 10_000))
            }
            // The space the failed write took is free again.
            try cache.set(Data(count: 10_000), forKey: "after")
            #expect(try cache.contains("after"))
        }
    }
}
