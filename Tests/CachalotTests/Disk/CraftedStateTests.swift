import CachalotTesting
import Foundation
import Testing

@testable import Cachalot

/// Records and headers with valid checksums but values no cache writes: every byte on disk is
/// hostile, and none may make the cache trap.
@Suite("DiskCache with crafted state")
struct CraftedStateTests {
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func appendToJournal(_ records: [JournalRecord]) throws {
        var journal = try Journal(path: self.directory.path + "/journal")
        _ = try journal.readNew()
        try journal.append(records)
        journal.close()
    }

    @Test("journal records whose sizes overflow the total are ignored, and every command still works")
    func overflowingSizes() throws {
        do {
            let cache = try DiskCache(directory: self.directory.url)
            try cache.set(Data("kept".utf8), forKey: "kept")
        }
        try self.appendToJournal([
            .set(KeyDigest(key: "a"), key: "a", size: Int.max - 10, created: 0, accessed: 0),
            .set(KeyDigest(key: "b"), key: "b", size: 100, created: 0, accessed: 0),
        ])
        let cache = try DiskCache(directory: self.directory.url)
        #expect(try cache.data(forKey: "kept") == Data("kept".utf8))
        #expect(try cache.totalSize >= 0)
        try cache.set(Data("new".utf8), forKey: "new")
        #expect(try cache.data(forKey: "new") == Data("new".utf8))
        try cache.removeAll()
        #expect(try cache.count == 0)
    }

    @Test("a creation date at the far ends of time does not trap the age check")
    func extremeDates() throws {
        try self.appendToJournal([
            .set(KeyDigest(key: "old"), key: "old", size: 10, created: .min, accessed: .min),
            .set(KeyDigest(key: "future"), key: "future", size: 10, created: .max, accessed: .max),
        ])
        let cache = try DiskCache(directory: self.directory.url, configuration: .init(maximumAge: .seconds(60)))
        #expect(try cache.data(forKey: "old") == nil)
        try cache.set(Data("x".utf8), forKey: "x")
        #expect(try cache.removeEntries(createdBefore: Date()) >= 0)
    }
}
