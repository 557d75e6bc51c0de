import CachalotTesting
import Foundation
import Testing

@testable import Cachalot

@Suite("DiskCache streaming")
struct DiskCacheStreamingTests {
    let directory: TemporaryDirectory
    let cache: DiskCache

    init() throws {
        self.directory = try TemporaryDirectory()
        self.cache = try DiskCache(directory: self.directory.url, configuration: .init(sizeLimit: 1 << 20))
    }

    var temporaryFiles: [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: self.directory.path + "/tmp")) ?? []
    }

    func chunks() -> [Data] {
        [Data(repeating: 1, count: 70_000), Data(repeating: 2, count: 3), Data(repeating: 3, count: 50_000)]
    }

    @Test("a streamed entry reads back whole, at once and in pieces")
    func streamedEntry() throws {
        let writer = try self.cache.makeWriter(forKey: "big", metadata: Data("head".utf8))
        for chunk in self.chunks() { try writer.append(chunk) }
        #expect(writer.bodyLength == 120_003)
        try writer.commit()
        let whole = self.chunks().reduce(Data(), +)
        let entry = try #require(try self.cache.entry(forKey: "big"))
        #expect(entry.data == whole)
        #expect(entry.metadata == Data("head".utf8))
        let reader = try #require(try self.cache.bodyReader(forKey: "big"))
        #expect(reader.bodyLength == whole.count)
        #expect(reader.metadata == Data("head".utf8))
        var pieces: [Data] = []
        while let piece = try reader.read(upTo: 16_384) { pieces.append(piece) }
        #expect(pieces.count == 8)
        #expect(pieces.allSatisfy { $0.count <= 16_384 })
        #expect(pieces.reduce(Data(), +) == whole)
        #expect(self.temporaryFiles.isEmpty)
    }

    @Test("a child process started while a body is read back from its writer's file does not hold the file")
    func spoolNotInherited() throws {
        let writer = try self.cache.makeWriter(forKey: "spooled")
        try writer.append(Data(repeating: 1, count: 1_000))
        let spool = try #require(writer.spool())
        // The child lists the descriptors it has: those it inherited, and the one `ls` opened.
        let child = try ChildProcess.start("/bin/ls", ["-l", "/proc/self/fd/"], capturingOutput: true)
        let listing = String(decoding: child.readOutput(), as: UTF8.self)
        #expect(child.waitForExit().status == 0)
        #expect(listing.contains("/proc/"), "\(listing)")
        #expect(!listing.contains(self.directory.path), "\(listing)")
        #expect(try spool.read(at: 0, count: 1_000) == Data(repeating: 1, count: 1_000))
        writer.discard()
    }

    @Test("nothing is visible before the commit, and an abandoned writer leaves nothing behind")
    func abandonedWriter() throws {
        try self.cache.set(Data("old".utf8), forKey: "k")
        do {
            let writer = try self.cache.makeWriter(forKey: "k")
            try writer.append(Data(count: 10_000))
            #expect(try self.cache.data(forKey: "k") == Data("old".utf8))
            #expect(self.temporaryFiles.count == 1)
        }  // released without a commit
        #expect(self.temporaryFiles.isEmpty)
        #expect(try self.cache.data(forKey: "k") == Data("old".utf8))
        let discarded = try self.cache.makeWriter(forKey: "k")
        try discarded.append(Data(count: 10))
        discarded.discard()
        #expect(self.temporaryFiles.isEmpty)
        #expect(throws: CacheError.self) { try discarded.append(Data(count: 1)) }
        #expect(throws: CacheError.self) { try discarded.commit() }
        #expect(try self.cache.data(forKey: "k") == Data("old".utf8))
    }

    @Test("a streamed entry larger than the limit is not kept, and the one before it goes")
    func oversizedStream() throws {
        try self.cache.set(Data("old".utf8), forKey: "k")
        let writer = try self.cache.makeWriter(forKey: "k")
        for _ in 0..<17 { try writer.append(Data(count: 65_536)) }
        try writer.commit()
        #expect(try self.cache.data(forKey: "k") == nil)
        #expect(self.temporaryFiles.isEmpty)
        #expect(try self.cache.totalSize == 0)
    }

    @Test("a body reader goes on reading the entry it opened after the entry is replaced")
    func readerKeepsItsFile() throws {
        try self.cache.set(Data(repeating: 1, count: 100_000), forKey: "k")
        let reader = try #require(try self.cache.bodyReader(forKey: "k"))
        let first = try #require(try reader.read(upTo: 10))
        try self.cache.set(Data(repeating: 2, count: 5), forKey: "k")
        var rest = Data()
        while let piece = try reader.read() { rest.append(piece) }
        #expect(first + rest == Data(repeating: 1, count: 100_000))
        #expect(try self.cache.data(forKey: "k") == Data(repeating: 2, count: 5))
    }

    @Test("a damaged entry gives no body reader and is removed")
    func damagedEntryHasNoReader() throws {
        try self.cache.set(Data(count: 1_000), forKey: "k")
        let name = KeyDigest(key: "k").hexadecimal
        let path = "\(self.directory.path)/entries/\(name.prefix(2))/\(name)"
        try #require(FileHandle(forUpdatingAtPath: path)).truncate(atOffset: 500)
        #expect(try self.cache.bodyReader(forKey: "k") == nil)
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
