import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The file of one disk-cache entry: a header, the key, the metadata, then the body.
///
/// ```
/// offset  size  field
///      0     4  magic "CCH2"
///      4     4  key length (UInt32, little-endian, as every number here)
///      8     4  metadata length
///     12     4  checksum of the body (``BodyChecksum``)
///     16     8  body length
///     24     8  created, nanoseconds since 1970
///     32     8  checksum (FNV-1a 64) of bytes 0..<32, the key and the metadata
///     40        key (UTF-8), metadata, body
/// ```
///
/// A file is whole when its size is exactly what its header adds up to and both checksums hold;
/// it belongs to a key when the key in it is that key. Anything else is read as no entry. A get
/// verifies the body before it answers, a mapped one too; reading only the prefix (for a
/// listing, or to rebuild the journal) checks the header's checksum alone.
///
/// Files of the first format, "CCH1", which had no body checksum, are read as no entry.
enum EntryFile {
    static let headerSize = 40
    static let magic: UInt32 = 0x3248_4343

    /// What a file holds, read back.
    struct Contents {
        var key: String
        var metadata: Data
        var body: Data
        var created: Int64
        var fileSize: Int
        /// The checksum of the body that the header records.
        var bodyChecksum: UInt32
    }

    /// The outcome of reading an entry's file.
    enum Reading {
        case missing
        /// Truncated, damaged, or another key's: the caller removes it.
        case invalid
        case valid(Contents)
    }

    /// The header, key and metadata: everything before the body.
    static func prefix(
        key: String,
        metadata: Data,
        bodyLength: Int,
        bodyChecksum: UInt32,
        created: Int64
    ) -> [UInt8] {
        let keyBytes = Array(key.utf8)
        var bytes = [UInt8]()
        bytes.reserveCapacity(Self.headerSize + keyBytes.count + metadata.count)
        func append<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }
        append(Self.magic)
        append(UInt32(keyBytes.count))
        append(UInt32(metadata.count))
        append(bodyChecksum)
        append(UInt64(bodyLength))
        append(created)
        let header = bytes
        bytes.append(contentsOf: keyBytes)
        bytes.append(contentsOf: metadata)
        // The same two parts that reading checks: bytes 0..<32, then the key and the metadata.
        let checksum = header.withUnsafeBytes { header in
            bytes.withUnsafeBytes { all in Checksum.of(header, UnsafeRawBufferPointer(rebasing: all[32...])) }
        }
        withUnsafeBytes(of: checksum.littleEndian) { checksumBytes in
            bytes.insert(contentsOf: checksumBytes, at: 32)
        }
        return bytes
    }

    /// How much a get reads before it knows the file's size. A smaller file, as most entries
    /// are, is read whole by one `pread` that stops at its end, with no `fstat`; a larger one
    /// takes an `fstat` and a second read for the rest.
    static let firstReadSize = 64 * 1024

    /// Files of this size or more are mapped rather than read: their body's pages are the page
    /// cache's, loaded as they are touched, not a copy in the process's memory. It is the
    /// loader's default threshold for writing a body to disk as it arrives. Entry files are
    /// never changed in place (a set renames a new file over the old one), so a mapping keeps
    /// the bytes it was made with. `cachalot serve` counts on bodies of up to 1 MiB never being
    /// mapped: it writes those from their own bytes on its event loops, which must not wait
    /// for a page to be read.
    static let mappingThreshold = 8 << 20

    /// Reads the whole entry from its open file; `expectedKey`, when given, must be the key in
    /// it. `path` names the file in errors.
    static func read(
        _ descriptor: Int32,
        path: @autoclosure () -> String,
        expectedKey: String?
    ) throws(CacheError) -> Reading {
        // One allocation that the body's Data then owns: no copy of the body.
        var buffer = UnsafeMutableRawBufferPointer(start: malloc(Self.firstReadSize)!, count: Self.firstReadSize)
        var owned = true
        defer { if owned { free(buffer.baseAddress) } }
        guard var size = try FileIO.readStart(descriptor, into: buffer, path: path()) else { return .invalid }
        if size == buffer.count {
            let (fileSize, isRegular) = try FileIO.size(of: descriptor, path: path())
            guard isRegular, fileSize >= size else { return .invalid }
            if fileSize >= Self.mappingThreshold {
                return try Self.readMapped(descriptor, fileSize: fileSize, path: path(), expectedKey: expectedKey)
            }
            buffer = UnsafeMutableRawBufferPointer(start: realloc(buffer.baseAddress, fileSize)!, count: fileSize)
            let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[size...])
            size += try FileIO.readFully(descriptor, into: rest, at: size, path: path())
            guard size == fileSize else { return .invalid }
        } else {
            // Give back what the file did not fill (glibc shrinks in place).
            buffer = UnsafeMutableRawBufferPointer(start: realloc(buffer.baseAddress, max(size, 1))!, count: size)
        }
        return Self.contents(of: UnsafeRawBufferPointer(buffer), expectedKey: expectedKey) { body in
            owned = false
            // The body's Data frees the whole buffer. The 8 bytes before the body (the end of
            // the header, key or metadata, all read by now) keep how far the buffer starts
            // before it, so that the deallocator captures nothing: a capturing one costs an
            // allocation more.
            let bodyStart = buffer.baseAddress! + body.lowerBound
            (bodyStart - 8).storeBytes(of: body.lowerBound, as: Int.self)
            return Data(
                bytesNoCopy: bodyStart,
                count: body.count,
                deallocator: .custom { start, _ in free(start - start.loadUnaligned(fromByteOffset: -8, as: Int.self)) }
            )
        }
    }

    /// Reads a large entry from its open file by mapping it; its body stays mapped.
    private static func readMapped(
        _ descriptor: Int32,
        fileSize: Int,
        path: String,
        expectedKey: String?
    ) throws(CacheError) -> Reading {
        let file = try FileIO.map(descriptor, count: fileSize, path: path)
        var owned = true
        defer { if owned { munmap(UnsafeMutableRawPointer(mutating: file.baseAddress), fileSize) } }
        return Self.contents(of: file, expectedKey: expectedKey) { body in
            owned = false
            return Data(
                bytesNoCopy: UnsafeMutableRawPointer(mutating: file.baseAddress! + body.lowerBound),
                count: body.count,
                deallocator: .custom { _, _ in munmap(UnsafeMutableRawPointer(mutating: file.baseAddress), fileSize) }
            )
        }
    }

    /// The contents of a whole entry file held in `file`, its body as `body` makes it from its
    /// range in `file` (called only for a valid file); `.invalid` if the file is damaged or, with
    /// `expectedKey`, another key's.
    static func contents(
        of file: UnsafeRawBufferPointer,
        expectedKey: String?,
        body: (Range<Int>) -> Data
    ) -> Reading {
        guard let layout = Self.layout(of: file, fileSize: file.count) else { return .invalid }
        let key: String
        if var expectedKey {
            // Compare the bytes: no new string for the usual case of a match.
            let stored = UnsafeRawBufferPointer(rebasing: file[layout.key])
            let isMatch = expectedKey.withUTF8 { expected in
                expected.count == stored.count
                    && (expected.isEmpty || memcmp(expected.baseAddress!, stored.baseAddress!, stored.count) == 0)
            }
            guard isMatch else { return .invalid }
            key = expectedKey
        } else {
            key = String(decoding: file[layout.key], as: UTF8.self)
        }
        guard BodyChecksum.of(UnsafeRawBufferPointer(rebasing: file[layout.body])) == layout.bodyChecksum else {
            return .invalid
        }
        let metadata =
            layout.metadata.isEmpty
            ? Data() : Data(bytes: file.baseAddress! + layout.metadata.lowerBound, count: layout.metadata.count)
        return .valid(
            Contents(
                key: key,
                metadata: metadata,
                body: body(layout.body),
                created: layout.created,
                fileSize: file.count,
                bodyChecksum: layout.bodyChecksum
            )
        )
    }

    /// Reads the header, key and metadata of the open entry file; the body starts at
    /// `fileSize - body length`, where the contents' `body` is empty.
    static func readPrefix(_ descriptor: Int32, path: String) throws(CacheError) -> Reading {
        let (size, isRegular) = try FileIO.size(of: descriptor, path: path)
        guard isRegular, size >= Self.headerSize else { return .invalid }
        var header = [UInt8](repeating: 0, count: Self.headerSize)
        let read = try FileIO.readFully(descriptor, into: &header, at: 0, path: path)
        guard read == Self.headerSize else { return .invalid }
        let keyLength = Int(Self.number(UInt32.self, in: header, at: 4))
        let metadataLength = Int(Self.number(UInt32.self, in: header, at: 8))
        let prefixSize = Self.headerSize + keyLength + metadataLength
        guard prefixSize <= size else { return .invalid }
        var prefix = [UInt8](repeating: 0, count: prefixSize)
        let prefixRead = try FileIO.readFully(descriptor, into: &prefix, at: 0, path: path)
        guard prefixRead == prefixSize else { return .invalid }
        return prefix.withUnsafeBytes { bytes in
            guard let layout = Self.layout(of: bytes, fileSize: size) else { return .invalid }
            return .valid(
                Contents(
                    key: String(decoding: bytes[layout.key], as: UTF8.self),
                    metadata: Data(bytes[layout.metadata]),
                    body: Data(),
                    created: layout.created,
                    fileSize: size,
                    bodyChecksum: layout.bodyChecksum
                )
            )
        }
    }

    /// Where the parts lie in a file of `fileSize` bytes whose first bytes are `bytes` (at least
    /// the header, key and metadata), or `nil` if the header is damaged or the size is wrong.
    static func layout(
        of bytes: UnsafeRawBufferPointer,
        fileSize: Int
    ) -> (key: Range<Int>, metadata: Range<Int>, body: Range<Int>, created: Int64, bodyChecksum: UInt32)? {
        guard bytes.count >= Self.headerSize, Self.number(UInt32.self, in: bytes, at: 0) == Self.magic else {
            return nil
        }
        let keyLength = Int(Self.number(UInt32.self, in: bytes, at: 4))
        let metadataLength = Int(Self.number(UInt32.self, in: bytes, at: 8))
        let bodyLength = Self.number(UInt64.self, in: bytes, at: 16)
        guard bodyLength <= UInt64(Int.max) else { return nil }
        let keyEnd = Self.headerSize + keyLength
        let metadataEnd = keyEnd + metadataLength
        let (end, overflow) = metadataEnd.addingReportingOverflow(Int(bodyLength))
        guard !overflow, end == fileSize, metadataEnd <= bytes.count else { return nil }
        let checksum = Checksum.of(
            UnsafeRawBufferPointer(rebasing: bytes[0..<32]),
            UnsafeRawBufferPointer(rebasing: bytes[Self.headerSize..<metadataEnd])
        )
        guard checksum == Self.number(UInt64.self, in: bytes, at: 32) else { return nil }
        return (
            Self.headerSize..<keyEnd, keyEnd..<metadataEnd, metadataEnd..<end,
            Int64(bitPattern: Self.number(UInt64.self, in: bytes, at: 24)),
            Self.number(UInt32.self, in: bytes, at: 12)
        )
    }

    private static func number<T: FixedWidthInteger>(
        _ type: T.Type,
        in bytes: UnsafeRawBufferPointer,
        at offset: Int
    ) -> T {
        T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    private static func number<T: FixedWidthInteger>(_ type: T.Type, in bytes: [UInt8], at offset: Int) -> T {
        bytes.withUnsafeBytes { Self.number(type, in: $0, at: offset) }
    }
}
