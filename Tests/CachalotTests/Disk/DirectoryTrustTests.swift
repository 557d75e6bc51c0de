import CachalotTesting
import Foundation
import Testing

@testable import Cachalot

#if canImport(Glibc)
import Glibc
#endif

/// A cache directory that another user could change is refused: whoever can swap its files
/// chooses what the cache serves. Giving a directory away takes root (CI runs as root).
@Suite("DiskCache refuses a directory another user could change", .enabled(if: getuid() == 0, "chown needs root"))
struct DirectoryTrustTests {
    static let parts = ["", "/tmp", "/entries", "/entries/ab", "/lock", "/journal"]

    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
        let cache = try DiskCache(directory: self.directory.url)
        try cache.set(Data("body".utf8), forKey: "key")
        mkdir(self.directory.path + "/entries/ab", 0o700)
    }

    @Test(
        "a directory or file of the cache that belongs to another user is refused, naming the owner",
        arguments: parts
    )
    func foreignOwner(part: String) throws {
        let path = self.directory.path + part
        try #require(chown(path, 54_321, 54_321) == 0)
        #expect {
            _ = try DiskCache(directory: self.directory.url)
        } throws: { error in
            let error = error as? CacheError
            return error?.path == path && error?.message.contains("uid 54321") == true
                && error?.message.contains("not to root (uid 0)") == true
        }
    }

    @Test(
        "a directory or file of the cache that others may write is refused, naming the chmod that fixes it",
        arguments: parts
    )
    func writableByOthers(part: String) throws {
        let path = self.directory.path + part
        let mode = ["/lock", "/journal"].contains(part) ? "600" : "700"
        try #require(chmod(path, 0o777) == 0)
        #expect {
            _ = try DiskCache(directory: self.directory.url)
        } throws: { error in
            (error as? CacheError)?.message.contains("chmod \(mode) \(path)") == true
        }
        try #require(chmod(path, mode == "600" ? 0o600 : 0o700) == 0)
        #expect(try DiskCache(directory: self.directory.url).data(forKey: "key") == Data("body".utf8))
    }

    @Test("entries/ made again by another user while a cache is open is refused at its next use")
    func entriesReplaced() throws {
        let cache = try DiskCache(directory: self.directory.url)
        try FileManager.default.removeItem(atPath: self.directory.path + "/entries")
        try #require(mkdir(self.directory.path + "/entries", 0o700) == 0)
        try #require(chown(self.directory.path + "/entries", 54_321, 54_321) == 0)
        #expect(throws: CacheError.self) { try cache.set(Data("other".utf8), forKey: "key") }
    }
}
