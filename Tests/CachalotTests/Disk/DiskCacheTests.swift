import CachalotTesting
import Foundation
import Synchronization
import Testing

@testable import Cachalot

@Suite("DiskCache")
struct DiskCacheTests {
    /// A wall clock that moves only when told.
    final class Calendar: Sendable {
        private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { self.current.withLock { $0 } }
        func advance(by seconds: TimeInterval) { self.current.withLock { $0 += seconds } }
    }

    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func open(
        sizeLimit: Int = 1 << 20,
        countLimit: Int? = nil,
        maximumAge: Duration? = nil,
        calendar: Calendar = Calendar()
    ) throws -> DiskCache {
        try DiskCache(
            directory: self.directory.url,
            configuration: .init(sizeLimit: sizeLimit, countLimit: countLimit, maximumAge: maximumAge),
            now: { calendar.now }
        )
    }

    func entryPath(_ key: String) -> String {
        let name = KeyDigest(key: key).hexadecimal
        return "\(self.directory.path)/entries/\(name.prefix(2))/\(name)"
    }

    func fileSize(_ path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
    }

    /// The space the file at `path` takes on disk, as `stat` reports its blocks.
    func space(_ path: String) throws -> Int {
        var status = stat()
        try #require(lstat(path, &status) == 0)
        return Int(status.st_blocks) * 512
    }

    /// The file system's allocation unit where the cache lives.
    var unit: Int { FileIO.allocationUnit(of: self.directory.path) }

    @Test("a set entry reads back with its metadata, and survives reopening")
    func roundTrip() throws {
        let cache = try self.open()
        try cache.set(Data("hello".utf8), forKey: "https://a.example/x?y=1", metadata: Data("head".utf8))
        let entry = try #require(try cache.entry(forKey: "https://a.example/x?y=1"))
        #expect(entry.data == Data("hello".utf8))
        #expect(entry.metadata == Data("head".utf8))
        #expect(entry.key == "https://a.example/x?y=1")
        #expect(try cache.data(forKey: "https://a.example/x?y=2") == nil)
        let reopened = try self.open()
        #expect(try reopened.data(forKey: "https://a.example/x?y=1") == Data("hello".utf8))
        #expect(try reopened.count == 1)
        #expect(try reopened.totalSize == (try self.space(self.entryPath("https://a.example/x?y=1"))))
    }

    @Test("keys of any content and length stay inside the directory")
    func strangeKeys() throws {
        let cache = try self.open()
        let keys = ["../../etc/passwd", "/", "", String(repeating: "ä/..", count: 5_000), "a\u{0}b"]
        for (index, key) in keys.enumerated() { try cache.set(Data([UInt8(index)]), forKey: key) }
        for (index, key) in keys.enumerated() { #expect(try cache.data(forKey: key) == Data([UInt8(index)])) }
        let names = try FileManager.default.contentsOfDirectory(atPath: self.directory.path).sorted()
        #expect(names == ["entries", "journal", "lock", "tmp"])
    }

    @Test("the size limit holds when every set returns, and the least recently used go first")
    func sizeLimitAndLeastRecentlyUsed() throws {
        let cache = try self.open(sizeLimit: 100_000)
        for index in 0..<10 { try cache.set(Data(count: 9_000), forKey: "key-\(index)") }
        _ = try cache.data(forKey: "key-0")  // now the most recently used
        for index in 10..<40 {
            try cache.set(Data(count: 9_000), forKey: "key-\(index)")
            #expect(try cache.totalSize <= 100_000)
        }
        let keys = Set(try cache.entries().map(\.key))
        #expect(keys.contains("key-39"))
        #expect(!keys.contains("key-1"))
    }

    @Test("the size limit counts the space files take on disk, so that tiny entries cannot overrun it")
    func tinyEntries() throws {
        let cache = try self.open(sizeLimit: 64 * self.unit)
        for index in 0..<500 { try cache.set(Data([1]), forKey: "tiny-\(index)") }
        #expect(try cache.count == 64)
        let spaces = try cache.entries().map { try self.space(self.entryPath($0.key)) }
        #expect(spaces.reduce(0, +) <= 64 * self.unit)
        #expect(try cache.totalSize == spaces.reduce(0, +))
        #expect(try cache.entries().allSatisfy { $0.size == self.unit })
    }

    @Test("reading an entry keeps it from eviction")
    func readingKeepsEntries() throws {
        // Five entries of two units each fit; a sixth does not.
        let cache = try self.open(sizeLimit: 11 * self.unit)
        for index in 0..<5 { try cache.set(Data(count: self.unit + 100), forKey: "key-\(index)") }
        _ = try cache.data(forKey: "key-0")
        try cache.set(Data(count: self.unit + 100), forKey: "key-5")
        #expect(try cache.contains("key-0"))
        #expect(try !cache.contains("key-1"))
    }

    @Test("the count limit holds, and a lower limit is applied when the cache opens")
    func limitsAtOpen() throws {
        do {
            let cache = try self.open(sizeLimit: 1 << 20, countLimit: 20)
            for index in 0..<30 { try cache.set(Data(count: 1_000), forKey: "key-\(index)") }
            #expect(try cache.count == 20)
        }
        let smaller = try self.open(sizeLimit: 4 * self.unit + 100)
        #expect(try smaller.totalSize <= 4 * self.unit + 100)
        #expect(try smaller.count == 4)
    }

    @Test("an entry larger than the whole limit is not stored, and the one before it goes")
    func oversizedEntry() throws {
        let cache = try self.open(sizeLimit: 10_000)
        try cache.set(Data(count: 100), forKey: "k")
        try cache.set(Data(count: 20_000), forKey: "k")
        #expect(try cache.data(forKey: "k") == nil)
        #expect(try cache.totalSize == 0)
    }

    @Test(
        "files around the first read's size and the mapping threshold read back whole, and cut short read as nothing",
        arguments: [
            EntryFile.firstReadSize - 1, EntryFile.firstReadSize, EntryFile.firstReadSize + 1,
            4 * EntryFile.firstReadSize, EntryFile.mappingThreshold - 1, EntryFile.mappingThreshold,
        ]
    )
    func readBoundaries(fileSize: Int) throws {
        let cache = try self.open(sizeLimit: 1 << 26)
        let key = "k"
        let bodyLength = fileSize - EntryFile.headerSize - key.utf8.count
        let body = Data((0..<bodyLength).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })
        try cache.set(body, forKey: key)
        let path = self.entryPath(key)
        #expect(try self.fileSize(path) == fileSize)
        let read = try #require(try cache.data(forKey: key))
        #expect(read == body)
        // A large body stays in the page cache, mapped; a smaller one is read.
        #expect(FileMappings.isMapped(read, fromUnder: self.directory.path) == (fileSize >= EntryFile.mappingThreshold))

        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.truncate(atOffset: UInt64(fileSize - 1))
        try handle.close()
        #expect(try cache.data(forKey: key) == nil)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test(
        "a truncated, damaged or foreign file reads as no entry and is removed",
        arguments: ["truncated", "damaged header", "foreign key", "empty", "directory"]
    )
    func damagedFiles(damage: String) throws {
        let cache = try self.open()
        try cache.set(Data(repeating: 7, count: 5_000), forKey: "victim")
        try cache.set(Data(repeating: 8, count: 5_000), forKey: "other")
        let path = self.entryPath("victim")
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        switch damage {
        case "truncated":
            try handle.truncate(atOffset: 4_000)
        case "damaged header":
            try handle.seek(toOffset: 20)
            try handle.write(contentsOf: Data([0xFF]))
        case "foreign key":
            try handle.close()
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.copyItem(atPath: self.entryPath("other"), toPath: path)
        case "empty":
            try handle.truncate(atOffset: 0)
        default:
            try handle.close()
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        }
        try? handle.close()
        #expect(try cache.data(forKey: "victim") == nil)
        #expect(try !cache.contains("victim"))
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try cache.data(forKey: "other") == Data(repeating: 8, count: 5_000))
    }

    @Test("a symbolic link in place of an entry is never followed")
    func symbolicLinks() throws {
        let cache = try self.open()
        try cache.set(Data("secret".utf8), forKey: "real")
        try cache.set(Data("x".utf8), forKey: "link")
        let path = self.entryPath("link")
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: self.entryPath("real"))
        #expect(try cache.data(forKey: "link") == nil)
    }

    @Test("the directory is private to its owner, and so are the files")
    func permissions() throws {
        let cache = try self.open()
        try cache.set(Data("x".utf8), forKey: "k")
        let directoryMode = try #require(
            FileManager.default.attributesOfItem(atPath: self.directory.path + "/entries")[.posixPermissions] as? Int
        )
        let fileMode = try #require(
            FileManager.default.attributesOfItem(atPath: self.entryPath("k"))[.posixPermissions] as? Int
        )
        #expect(directoryMode == 0o700)
        #expect(fileMode == 0o600)
    }

    @Test("leftover temporary files of processes that are gone are removed at open")
    func leftoverTemporaryFiles() throws {
        _ = try self.open()
        let leftover = self.directory.path + "/tmp/999999999-1-1"
        #expect(FileManager.default.createFile(atPath: leftover, contents: Data(count: 100)))
        _ = try self.open()
        #expect(!FileManager.default.fileExists(atPath: leftover))
    }

    @Test("a deleted cache directory is made again by the next set")
    func deletedDirectory() throws {
        let cache = try self.open()
        try cache.set(Data("a".utf8), forKey: "a")
        try FileManager.default.removeItem(at: self.directory.url)
        try cache.set(Data("b".utf8), forKey: "b")
        #expect(try cache.data(forKey: "b") == Data("b".utf8))
        #expect(try cache.data(forKey: "a") == nil)
        #expect(try cache.count == 1)
    }

    /// A key other than `key` whose file goes in the same subdirectory of `entries/`.
    func neighbour(of key: String) -> String {
        let subdirectory = KeyDigest(key: key).subdirectory
        return (0...).lazy.map { "neighbour-\($0)" }.first { KeyDigest(key: $0).subdirectory == subdirectory }!
    }

    @Test("a set into a subdirectory deleted by hand since the last change in it makes it again")
    func deletedSubdirectory() throws {
        let cache = try self.open()
        try cache.set(Data("a".utf8), forKey: "a")
        let subdirectory = (self.entryPath("a") as NSString).deletingLastPathComponent
        try FileManager.default.removeItem(atPath: subdirectory)
        let neighbour = self.neighbour(of: "a")
        try cache.set(Data("b".utf8), forKey: neighbour)
        #expect(try cache.data(forKey: neighbour) == Data("b".utf8))
        #expect(FileManager.default.fileExists(atPath: self.entryPath(neighbour)))
        #expect(try cache.data(forKey: "a") == nil)
    }

    @Test("a set after entries/ was deleted by hand makes it again, in a subdirectory used before")
    func deletedEntriesDirectory() throws {
        let cache = try self.open()
        try cache.set(Data("a".utf8), forKey: "a")
        try FileManager.default.removeItem(atPath: self.directory.path + "/entries")
        let neighbour = self.neighbour(of: "a")
        try cache.set(Data("b".utf8), forKey: neighbour)
        #expect(try cache.data(forKey: neighbour) == Data("b".utf8))
        #expect(FileManager.default.fileExists(atPath: self.entryPath(neighbour)))
    }

    @Test("a removal reaches the file in a subdirectory made again by hand, not the one deleted")
    func removalInSubdirectoryMadeAgain() throws {
        let cache = try self.open()
        try cache.set(Data("a".utf8), forKey: "a")
        let path = self.entryPath("a")
        let subdirectory = (path as NSString).deletingLastPathComponent
        let copy = self.directory.path + "/copy"
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        try FileManager.default.removeItem(atPath: subdirectory)
        try FileManager.default.createDirectory(
            atPath: subdirectory,
            withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700]
        )
        try FileManager.default.moveItem(atPath: copy, toPath: path)
        #expect(try cache.data(forKey: "a") == Data("a".utf8))
        #expect(try cache.removeValue(forKey: "a"))
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try cache.data(forKey: "a") == nil)
    }

    @Test("uses noted since the last change reach the journal when the cache is released")
    func accessesFlushedOnRelease() throws {
        let calendar = Calendar()
        do {
            let cache = try self.open(sizeLimit: 7 * self.unit, calendar: calendar)
            for index in 0..<3 { try cache.set(Data(count: self.unit + 100), forKey: "key-\(index)") }
            calendar.advance(by: 1)
            _ = try cache.data(forKey: "key-0")  // noted in memory only, until released
        }
        // Reopened, the cache evicts by the use before the release: key-1 is the oldest now.
        let cache = try self.open(sizeLimit: 7 * self.unit, calendar: calendar)
        try cache.set(Data(count: self.unit + 100), forKey: "key-3")
        #expect(try cache.contains("key-0"))
        #expect(try !cache.contains("key-1"))
    }

    @Test("a cache released after its directory was deleted does not make the directory again")
    func releasedAfterDeletion() throws {
        var cache: DiskCache? = try self.open()
        try cache?.set(Data("a".utf8), forKey: "a")
        _ = try cache?.data(forKey: "a")  // a use not yet in the journal
        try FileManager.default.removeItem(at: self.directory.url)
        cache = nil
        #expect(!FileManager.default.fileExists(atPath: self.directory.path))
    }

    @Test("after the directory is deleted, caches on it lock the same new lock file and agree")
    func deletedDirectoryWithTwoCaches() throws {
        let first = try self.open()
        let second = try self.open()
        try first.set(Data("a".utf8), forKey: "a")
        try FileManager.default.removeItem(at: self.directory.url)
        try first.set(Data("b".utf8), forKey: "b")
        try second.set(Data("c".utf8), forKey: "c")
        #expect(try first.isLockingCurrentLockFile)
        #expect(try second.isLockingCurrentLockFile)
        #expect(try first.data(forKey: "c") == Data("c".utf8))
        #expect(try second.data(forKey: "b") == Data("b".utf8))
        #expect(try Set(first.entries().map(\.key)) == ["b", "c"])
        #expect(try Set(second.entries().map(\.key)) == ["b", "c"])
    }

    @Test("a sweep removes files the journal does not know and forgets entries whose files are gone")
    func sweep() throws {
        let strays = try self.makeStrays()
        let cache = try self.open()
        // Opening did not scan: the strays are still there, and the kept entry reads back.
        #expect(strays.allSatisfy { FileManager.default.fileExists(atPath: $0) })
        #expect(try cache.data(forKey: "kept") == Data(count: 100))
        #expect(try cache.sweep() == strays.count + 1)
        #expect(!strays.contains { FileManager.default.fileExists(atPath: $0) })
        #expect(try cache.entries().map(\.key) == ["kept"])
        #expect(try cache.totalSize == (try self.space(self.entryPath("kept"))))
        #expect(try cache.data(forKey: "kept") == Data(count: 100))
        #expect(try cache.sweep() == 0)
    }

    @Test("the first 257 changes after opening sweep the directory, a subdirectory each")
    func sweepAfterOpening() throws {
        let strays = try self.makeStrays()
        let cache = try self.open()
        for _ in 0..<256 { try cache.removeValue(forKey: "absent") }
        #expect(FileManager.default.fileExists(atPath: strays[0]))  // the last step's
        try cache.removeValue(forKey: "absent")
        #expect(!strays.contains { FileManager.default.fileExists(atPath: $0) })
        #expect(try cache.count == 1)
        #expect(try cache.sweep() == 0)
    }

    /// Stores "kept" and "lost", deletes the file of "lost" and adds stray files the journal does
    /// not know; returns the strays' paths, the one outside any subdirectory first.
    func makeStrays() throws -> [String] {
        do {
            let cache = try self.open()
            try cache.set(Data(count: 100), forKey: "kept")
            try cache.set(Data(count: 100), forKey: "lost")
        }
        try FileManager.default.removeItem(atPath: self.entryPath("lost"))
        let entries = self.directory.path + "/entries"
        let unknown = self.entryPath("never stored")
        try FileManager.default.createDirectory(
            atPath: (unknown as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true
        )
        try FileManager.default.copyItem(atPath: self.entryPath("kept"), toPath: unknown)
        let keptDirectory = (self.entryPath("kept") as NSString).deletingLastPathComponent
        let strays = [entries + "/notes.txt", keptDirectory + "/notes.txt", unknown, keptDirectory + "/link"]
        for path in strays.dropLast() where !FileManager.default.fileExists(atPath: path) {
            #expect(FileManager.default.createFile(atPath: path, contents: Data("stray".utf8)))
        }
        try FileManager.default.createSymbolicLink(atPath: strays[3], withDestinationPath: "/etc/passwd")
        return strays
    }

    @Test("a cache whose directory vanished closes only its own descriptors when released")
    func noDoubleCloseAfterFailedReopen() throws {
        var cache: DiskCache? = try self.open()
        try cache?.set(Data("a".utf8), forKey: "a")
        try FileManager.default.removeItem(at: self.directory.url)
        // A directory where the journal belongs: reopening the journal fails, and must not have
        // closed the old descriptor first.
        try FileManager.default.createDirectory(
            atPath: self.directory.path + "/journal",
            withIntermediateDirectories: true
        )
        #expect(throws: CacheError.self) { try cache?.removeValue(forKey: "a") }
        // A file opened now takes the lowest free descriptor number, which a wrongly closed
        // journal descriptor would be; releasing the cache must leave it open.
        let handle = try #require(FileHandle(forReadingAtPath: "/dev/null"))
        let bystander = handle.fileDescriptor

        cache = nil
        #expect(fcntl(bystander, F_GETFD) != -1)
        try handle.close()
    }

    @Test("a lost journal is rebuilt from the entry files")
    func lostJournal() throws {
        do {
            let cache = try self.open()
            for index in 0..<5 { try cache.set(Data(count: 100 + index), forKey: "key-\(index)") }
        }
        try FileManager.default.removeItem(atPath: self.directory.path + "/journal")
        let cache = try self.open()
        #expect(try cache.count == 5)
        #expect(try cache.data(forKey: "key-3") == Data(count: 103))
    }

    @Test("a torn record at the end of the journal is cut off and nothing else is lost")
    func tornJournal() throws {
        do {
            let cache = try self.open()
            for index in 0..<5 { try cache.set(Data(count: 100), forKey: "key-\(index)") }
        }
        let journal = try #require(FileHandle(forUpdatingAtPath: self.directory.path + "/journal"))
        try journal.seekToEnd()
        try journal.write(contentsOf: Data([40, 0, 0, 0, 1, 9, 9]))
        try journal.close()
        let cache = try self.open()
        #expect(try cache.count == 5)
        try cache.set(Data(count: 10), forKey: "after")
        #expect(try self.open().count == 6)
    }

    @Test("an intent left by a writer that died is settled by what the files hold")
    func openIntentIsSettled() throws {
        do {
            let cache = try self.open()
            try cache.set(Data("old".utf8), forKey: "k")
        }
        // A writer announced a change of "k", replaced the file, and died before recording it.
        let journalPath = self.directory.path + "/journal"
        var journal = try Journal(path: journalPath)
        _ = try journal.readNew()
        try journal.append([.intent([KeyDigest(key: "k")])])
        journal.close()
        let prefix = EntryFile.prefix(
            key: "k",
            metadata: Data(),
            bodyLength: 5,
            bodyChecksum: BodyChecksum.of(Data("newer".utf8)),
            created: 0
        )
        try Data(prefix + Array("newer".utf8)).write(to: URL(fileURLWithPath: self.entryPath("k")))
        let cache = try self.open()
        #expect(try cache.data(forKey: "k") == Data("newer".utf8))
        #expect(try cache.totalSize == (try self.space(self.entryPath("k"))))
    }

    @Test("entries can be removed by age of creation, by last access, by trimming, or all at once")
    func removals() throws {
        let calendar = Calendar()
        let cache = try self.open(calendar: calendar)
        for index in 0..<4 { try cache.set(Data(count: 1_000), forKey: "old-\(index)") }
        calendar.advance(by: 3_600)
        for index in 0..<4 { try cache.set(Data(count: 1_000), forKey: "new-\(index)") }
        _ = try cache.data(forKey: "old-0")
        #expect(try cache.removeEntries(notAccessedSince: calendar.now.addingTimeInterval(-60)) == 3)
        #expect(try cache.contains("old-0"))
        #expect(try cache.removeEntries(createdBefore: calendar.now.addingTimeInterval(-60)) == 1)
        #expect(try cache.trim(toSize: 2 * self.unit) == 2)
        #expect(try cache.count == 2)
        try cache.removeAll()
        #expect(try cache.count == 0)
        #expect(try cache.totalSize == 0)
        #expect(
            try FileManager.default.subpathsOfDirectory(atPath: self.directory.path + "/entries").allSatisfy {
                !$0.contains("/")
            }
        )
    }

    @Test("an entry older than the maximum age is not returned")
    func maximumAge() throws {
        let calendar = Calendar()
        let cache = try self.open(maximumAge: .seconds(60), calendar: calendar)
        try cache.set(Data("x".utf8), forKey: "k")
        calendar.advance(by: 59)
        #expect(try cache.data(forKey: "k") != nil)
        calendar.advance(by: 1)
        #expect(try cache.data(forKey: "k") == nil)
        #expect(try cache.count == 0)
    }

    @Test(
        "an invalid configuration is rejected with a clear error",
        arguments: [
            DiskCache.Configuration(sizeLimit: 0),
            DiskCache.Configuration(countLimit: 0),
            DiskCache.Configuration(maximumAge: .zero),
        ]
    )
    func invalidConfiguration(configuration: DiskCache.Configuration) {
        #expect {
            _ = try DiskCache(directory: self.directory.url, configuration: configuration)
        } throws: { error in
            (error as? CacheError)?.code == .invalidConfiguration
        }
    }

    @Test("a cache directory that is a file is a clear error")
    func directoryIsAFile() throws {
        let file = self.directory.url.appendingPathComponent("file")
        #expect(FileManager.default.createFile(atPath: file.path, contents: Data()))
        #expect {
            _ = try DiskCache(directory: file)
        } throws: { error in
            (error as? CacheError)?.code == .fileSystem && (error as? CacheError)?.path == file.path
        }
    }

    #if os(Linux)
    @Test("a directory that cannot be made where its parent exists is a clear error, not a loop")
    func directoryThatCannotBeMade() throws {
        // mkdir in /proc fails with ENOENT although /proc exists.
        let path = "/proc/cachalot-\(UUID().uuidString)/cache"
        #expect {
            _ = try DiskCache(directory: URL(filePath: path))
        } throws: { error in
            (error as? CacheError)?.code == .fileSystem
        }
    }
    #endif

    @Test("mayContain: false for a key with no file, true once its entry is stored, false once removed")
    func mayContain() throws {
        let cache = try self.open()
        #expect(!cache.mayContain("a"))
        try cache.set(Data("x".utf8), forKey: "a")
        #expect(cache.mayContain("a"))
        #expect(!cache.mayContain("b"))
        #expect(try cache.removeValue(forKey: "a"))
        #expect(!cache.mayContain("a"))
        // Stored by another cache on the same directory: the file tells, not this cache's memory.
        try self.open().set(Data("y".utf8), forKey: "b")
        #expect(cache.mayContain("b"))
    }

    @Test("a FIFO in an entry's place is no entry, and is read without waiting for a writer", .timeLimit(.minutes(1)))
    func fifoInAnEntrysPlace() throws {
        let cache = try self.open()
        try cache.set(Data("x".utf8), forKey: "a")
        let path = self.entryPath("a")
        #expect(unlink(path) == 0)
        #expect(mkfifo(path, 0o600) == 0)
        // Each of these waited for a writer forever while entry files were opened blocking.
        #expect(cache.mayContain("a"))
        #expect(try cache.metadata(forKey: "a") == nil)
        #expect(try cache.entry(forKey: "a") == nil)
        // The read found it was no entry, and removed it.
        #expect(!FileManager.default.fileExists(atPath: path))
        try cache.set(Data("y".utf8), forKey: "a")
        #expect(try cache.data(forKey: "a") == Data("y".utf8))
    }
}
