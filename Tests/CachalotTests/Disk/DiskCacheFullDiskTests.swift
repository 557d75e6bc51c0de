import CachalotTesting
import Foundation
import Testing

@testable import Cachalot

/// A real full disk: a 512 KiB tmpfs, which needs root to mount (CI runs as root).
@Suite("DiskCache on a full disk", .enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
struct DiskCacheFullDiskTests {
    static func run(_ arguments: [String]) throws -> Int32 {
        try ChildProcess.start(arguments[0], Array(arguments.dropFirst())).waitForExit().status
    }

    @Test("a write that runs out of space fails clearly, leaves nothing behind, and reads keep working")
    func outOfSpace() throws {
        let directory = try TemporaryDirectory()
        let mountPoint = directory.url.appendingPathComponent("tiny")
        try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: false)
        try #require(try Self.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", mountPoint.path]) == 0)
        defer { _ = try? Self.run(["umount", mountPoint.path]) }

        let cache = try DiskCache(
            directory: mountPoint.appendingPathComponent("cache"),
            configuration: .init(sizeLimit: 64 << 20)
        )
        for index in 0..<10 { try cache.set(Data(repeating: UInt8(index), count: 10_000), forKey: "small-\(index)") }
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
