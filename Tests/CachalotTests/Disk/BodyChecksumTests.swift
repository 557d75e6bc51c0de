import CCachalotCore
import CachalotTesting
import Foundation
import Testing

@testable import Cachalot

@Suite("Body checksum")
struct BodyChecksumTests {
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func open() throws -> DiskCache {
        try DiskCache(directory: self.directory.url, configuration: .init(sizeLimit: 64 << 20))
    }

    func entryPath(_ key: String) -> String {
        let name = KeyDigest(key: key).hexadecimal
        return "\(self.directory.path)/entries/\(name.prefix(2))/\(name)"
    }

    /// Flips the bits of the byte `offsetFromEnd` bytes before the end of the file.
    func flipByte(in path: String, offsetFromEnd: Int) throws {
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        defer { try? handle.close() }
        let end = try handle.seekToEnd()
        try handle.seek(toOffset: end - UInt64(offsetFromEnd))
        let byte = try #require(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: end - UInt64(offsetFromEnd))
        try handle.write(contentsOf: Data([~byte]))
    }

    static func randomBytes(_ count: Int, seed: UInt64) -> Data {
        var generator = SeededGenerator(seed: seed)
        return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    @Test("CRC-32C gives the standard check value, with the processor's instruction and without")
    func checkValue() {
        let digits = Array("123456789".utf8)
        #expect(cachalot_crc32c(0, digits, digits.count) == 0xE306_9283)
        #expect(cachalot_crc32c_portable(0, digits, digits.count) == 0xE306_9283)
        #if arch(x86_64)
        // Every x86-64 machine this runs on has SSE 4.2; a fallback to the table here would be slow.
        #expect(cachalot_crc32c_is_accelerated() != 0)
        #endif
    }

    @Test("the checksum is the same at once and in pieces of any size, and sees every length")
    func piecesAgree() {
        let bytes = Self.randomBytes(1_000, seed: 7)
        var generator = SeededGenerator(seed: 8)
        var seen = Set<UInt32>()
        for length in [0, 1, 7, 8, 23, 24, 25, 47, 48, 49, 100, 999, 1_000] {
            let part = bytes.prefix(length)
            let whole = BodyChecksum.of(part)
            var pieces = BodyChecksum()
            var offset = part.startIndex
            while offset < part.endIndex {
                let next = min(part.endIndex, offset + Int.random(in: 0...30, using: &generator))
                pieces.update(part[offset..<next])
                offset = next
            }
            #expect(pieces.value == whole, "length \(length)")
            seen.insert(whole)
        }
        // Zeros of different lengths differ too: the length is part of the checksum.
        #expect(BodyChecksum.of(Data(count: 24)) != BodyChecksum.of(Data(count: 48)))
        #expect(seen.count == 13)
    }

    @Test("the accelerated lanes agree with the portable table")
    func acceleratedAgreesWithPortable() {
        let bytes = Self.randomBytes(4_099, seed: 9)
        bytes.withUnsafeBytes { buffer in
            for length in [0, 5, 8, 64, 4_099] {
                let part = UnsafeRawBufferPointer(rebasing: buffer[0..<length])
                #expect(
                    cachalot_crc32c(0, part.baseAddress, length)
                        == cachalot_crc32c_portable(0, part.baseAddress, length)
                )
            }
        }
    }

    @Test(
        "a body with one flipped byte reads as no entry and is removed, read or mapped",
        arguments: [1_000, 100_000, 9 << 20]
    )
    func flippedBodyByte(size: Int) throws {
        let cache = try self.open()
        let body = Self.randomBytes(size, seed: UInt64(size))
        try cache.set(body, forKey: "victim", metadata: Data("head".utf8))
        try cache.set(Data("other".utf8), forKey: "other")
        try self.flipByte(in: self.entryPath("victim"), offsetFromEnd: size / 2)
        #expect(try cache.data(forKey: "victim") == nil)
        #expect(!FileManager.default.fileExists(atPath: self.entryPath("victim")))
        #expect(try cache.data(forKey: "other") == Data("other".utf8))
        // A new set of the key is whole again.
        try cache.set(body, forKey: "victim")
        #expect(try cache.data(forKey: "victim") == body)
    }

    @Test("a streamed entry is verified too: at once, and by the read of a body reader that reaches the end")
    func streamedEntryVerified() throws {
        let cache = try self.open()
        let writer = try cache.makeWriter(forKey: "big")
        let body = Self.randomBytes(200_000, seed: 3)
        for start in stride(from: 0, to: body.count, by: 30_001) {
            try writer.append(body[start..<min(body.count, start + 30_001)])
        }
        try writer.commit()
        #expect(try cache.data(forKey: "big") == body)

        try self.flipByte(in: self.entryPath("big"), offsetFromEnd: 1)
        let reader = try #require(try cache.bodyReader(forKey: "big"))
        var received = 0
        #expect(throws: CacheError.self) {
            while let piece = try reader.read(upTo: 65_536) { received += piece.count }
        }
        // Every piece but the last was handed out; the last one, with the damage, was not.
        #expect(received == 3 * 65_536)
        #expect(!FileManager.default.fileExists(atPath: self.entryPath("big")))
    }

    @Test("a file of the first format, which had no body checksum, reads as no entry")
    func firstFormat() throws {
        let cache = try self.open()
        try cache.set(Data("x".utf8), forKey: "k")
        let handle = try #require(FileHandle(forUpdatingAtPath: self.entryPath("k")))
        try handle.write(contentsOf: Data("CCH1".utf8))
        try handle.close()
        #expect(try cache.data(forKey: "k") == nil)
    }
}
