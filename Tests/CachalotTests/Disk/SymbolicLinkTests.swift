import CCachalotCore
import CachalotTesting
import Foundation
import Testing

@testable import Cachalot

/// A symbolic link planted where the cache keeps a directory: nothing outside the cache
/// directory is ever read, written or removed through it.
@Suite("DiskCache with symbolic links planted in it")
struct SymbolicLinkTests {
    let directory: TemporaryDirectory
    /// A directory outside the cache, with files of its own that must survive everything.
    let outside: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
        self.outside = try TemporaryDirectory()
    }

    func open() throws -> DiskCache {
        try DiskCache(directory: self.directory.url)
    }

    /// The subdirectory of `entries/` that `key`'s file goes in.
    func subdirectory(of key: String) -> String {
        "\(self.directory.path)/entries/\(KeyDigest(key: key).hexadecimal.prefix(2))"
    }

    /// Replaces `key`'s subdirectory with a link to the outside directory, which holds a copy
    /// of `key`'s entry file under its own name (as a planted file would be) and a file of its
    /// own.
    func plantLink(for key: String) throws {
        let subdirectory = self.subdirectory(of: key)
        let name = KeyDigest(key: key).hexadecimal
        try FileManager.default.copyItem(atPath: "\(subdirectory)/\(name)", toPath: "\(self.outside.path)/\(name)")
        try Data("precious".utf8).write(to: self.outside.url.appendingPathComponent("precious.txt"))
        try FileManager.default.removeItem(atPath: subdirectory)
        try FileManager.default.createSymbolicLink(atPath: subdirectory, withDestinationPath: self.outside.path)
    }

    var outsideFiles: Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: self.outside.path)) ?? [])
    }

    @Test("a get does not read an entry through a linked subdirectory")
    func getDoesNotFollow() throws {
        let cache = try self.open()
        try cache.set(Data("planted".utf8), forKey: "k")
        try self.plantLink(for: "k")
        #expect(try cache.data(forKey: "k") == nil)
        #expect(self.outsideFiles.count == 2)
    }

    @Test("removing everything removes the link, not what it points to")
    func clearDoesNotFollow() throws {
        let cache = try self.open()
        for index in 0..<50 { try cache.set(Data("v\(index)".utf8), forKey: "key-\(index)") }
        try self.plantLink(for: "key-7")
        try cache.removeAll()
        #expect(self.outsideFiles.count == 2)
        #expect(try cache.count == 0)
    }

    @Test("a rebuild after the journal is lost does not remove or read files through a link")
    func rebuildDoesNotFollow() throws {
        do {
            let cache = try self.open()
            for index in 0..<50 { try cache.set(Data("v\(index)".utf8), forKey: "key-\(index)") }
            try self.plantLink(for: "key-7")
        }
        try FileManager.default.removeItem(atPath: self.directory.path + "/journal")
        let cache = try self.open()
        #expect(self.outsideFiles.count == 2)
        #expect(try cache.data(forKey: "key-7") == nil)
        #expect(try cache.data(forKey: "key-8") == Data("v8".utf8))
    }

    @Test("a set whose subdirectory is a link writes inside the cache, and leaves the link's target alone")
    func setDoesNotFollow() throws {
        let cache = try self.open()
        try cache.set(Data("first".utf8), forKey: "k")
        try self.plantLink(for: "k")
        let before = try Data(contentsOf: self.outside.url.appendingPathComponent(KeyDigest(key: "k").hexadecimal))
        try cache.set(Data("second".utf8), forKey: "k")
        #expect(try cache.data(forKey: "k") == Data("second".utf8))
        #expect(self.outsideFiles.count == 2)
        #expect(
            try Data(contentsOf: self.outside.url.appendingPathComponent(KeyDigest(key: "k").hexadecimal)) == before
        )
        // The subdirectory is a directory of the cache's own again.
        var status = stat()
        #expect(lstat(self.subdirectory(of: "k"), &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR)
    }

    @Test("removing one entry and sweeping do not reach through a link")
    func removeAndSweepDoNotFollow() throws {
        let cache = try self.open()
        try cache.set(Data("x".utf8), forKey: "k")
        try self.plantLink(for: "k")
        try cache.removeValue(forKey: "k")
        #expect(self.outsideFiles.count == 2)
        _ = try cache.sweep()
        #expect(self.outsideFiles.count == 2)
    }

    @Test("temporary files are removed only inside the cache's own tmp directory")
    func leftoverTemporaryFiles() throws {
        do { _ = try self.open() }
        try FileManager.default.removeItem(atPath: self.directory.path + "/tmp")
        try Data("precious".utf8).write(to: self.outside.url.appendingPathComponent("999999-1-1"))
        try FileManager.default.createSymbolicLink(
            atPath: self.directory.path + "/tmp",
            withDestinationPath: self.outside.path
        )
        #expect(throws: CacheError.self) { _ = try self.open() }
        #expect(self.outsideFiles == ["999999-1-1"])
    }
}

@Suite("Opening beneath a directory")
struct OpenBeneathTests {
    @Test("a link anywhere on the way, or a way out, is refused; a plain path opens", arguments: [false, true])
    func refusesLinks(walking: Bool) throws {
        let directory = try TemporaryDirectory()
        let outside = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path + "/a/b", withIntermediateDirectories: true)
        try Data("in".utf8).write(to: directory.url.appendingPathComponent("a/b/file"))
        try Data("out".utf8).write(to: outside.url.appendingPathComponent("file"))
        try FileManager.default.createSymbolicLink(
            atPath: directory.path + "/a/link",
            withDestinationPath: outside.path
        )
        try FileManager.default.createSymbolicLink(
            atPath: directory.path + "/a/b/last",
            withDestinationPath: outside.path + "/file"
        )
        let root = Glibc.open(directory.path, O_RDONLY | O_DIRECTORY)
        defer { close(root) }
        func open(_ path: String) -> (Int32, Int32) {
            let descriptor =
                walking
                ? cachalot_open_beneath_walking(root, path, O_RDONLY, 0)
                : cachalot_open_beneath(root, path, O_RDONLY, 0)
            let error = errno
            if descriptor >= 0 { close(descriptor) }
            return (descriptor, error)
        }
        #expect(open("a/b/file").0 >= 0)
        // A link to a directory fails as a link (ELOOP) or as no directory (ENOTDIR).
        let throughLink = open("a/link/file")
        #expect(throughLink.0 == -1 && [ELOOP, ENOTDIR].contains(throughLink.1))
        #expect(open("a/b/last") == (-1, ELOOP))
        #expect(open("a/../../\(URL(fileURLWithPath: outside.path).lastPathComponent)/file").0 == -1)
        #expect(open("/etc/hostname").0 == -1)
    }
}
