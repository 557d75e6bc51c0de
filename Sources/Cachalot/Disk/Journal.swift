#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One change to the disk cache's index, as the journal stores it.
enum JournalRecord: Equatable {
    /// The entry for a key now has this file.
    case set(KeyDigest, key: String, size: Int, created: Int64, accessed: Int64)
    case remove(KeyDigest)
    case access(KeyDigest, accessed: Int64)
    /// A writer is about to rename or remove the files of these digests. Until the next
    /// ``commit``, what is on disk for them is uncertain.
    case intent([KeyDigest])
    case commit

    /// The record of an entry whose file holds `contents`.
    static func set(_ digest: KeyDigest, _ contents: EntryFile.Contents, accessed: Int64) -> JournalRecord {
        .set(digest, key: contents.key, size: contents.fileSize, created: contents.created, accessed: accessed)
    }

    private var type: UInt8 {
        switch self {
        case .set: 1
        case .remove: 2
        case .access: 3
        case .intent: 4
        case .commit: 5
        }
    }

    /// `[payload length: UInt32][type: UInt8][payload][checksum of type and payload: UInt64]`,
    /// written straight into `bytes`.
    func encode(into bytes: inout [UInt8]) {
        func append<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }
        let start = bytes.count
        append(UInt32(0))  // the payload length, filled in below
        bytes.append(self.type)
        switch self {
        case .set(let digest, let key, let size, let created, let accessed):
            digest.append(to: &bytes)
            append(UInt64(size))
            append(created)
            append(accessed)
            bytes.append(contentsOf: key.utf8)
        case .remove(let digest):
            digest.append(to: &bytes)
        case .access(let digest, let accessed):
            digest.append(to: &bytes)
            append(accessed)
        case .intent(let digests):
            for digest in digests { digest.append(to: &bytes) }
        case .commit:
            break
        }
        let payloadLength = bytes.count - start - 5
        withUnsafeBytes(of: UInt32(payloadLength).littleEndian) { length in
            bytes.withUnsafeMutableBytes { $0[start..<(start + 4)].copyBytes(from: length) }
        }
        let checksum = bytes.withUnsafeBytes { all in
            Checksum.of(
                UnsafeRawBufferPointer(rebasing: all[(start + 4)..<(start + 5)]),
                UnsafeRawBufferPointer(rebasing: all[(start + 5)...])
            )
        }
        append(checksum)
    }

    /// Decodes the record at the start of `bytes`; returns it and its length, or `nil` if the
    /// bytes there are not a whole, intact record.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> (record: JournalRecord, length: Int)? {
        guard bytes.count >= 13 else { return nil }
        let payloadLength = Int(UInt32(littleEndian: bytes.loadUnaligned(as: UInt32.self)))
        let length = 4 + 1 + payloadLength + 8
        guard bytes.count >= length else { return nil }
        let type = bytes[4]
        let payload = UnsafeRawBufferPointer(rebasing: bytes[5..<(5 + payloadLength)])
        let stored = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 5 + payloadLength, as: UInt64.self))
        let checksum = withUnsafeBytes(of: type) { Checksum.of($0, payload) }
        guard stored == checksum else { return nil }
        func number<T: FixedWidthInteger>(at offset: Int, as: T.Type) -> T {
            T(littleEndian: payload.loadUnaligned(fromByteOffset: offset, as: T.self))
        }
        let record: JournalRecord
        switch type {
        case 1 where payloadLength >= 56:
            let size = number(at: 32, as: UInt64.self)
            guard size <= UInt64(Int.max) else { return nil }
            record = .set(
                KeyDigest(bytes: payload),
                key: String(decoding: payload[56...], as: UTF8.self),
                size: Int(size),
                created: number(at: 40, as: Int64.self),
                accessed: number(at: 48, as: Int64.self)
            )
        case 2 where payloadLength == 32:
            record = .remove(KeyDigest(bytes: payload))
        case 3 where payloadLength == 40:
            record = .access(KeyDigest(bytes: payload), accessed: number(at: 32, as: Int64.self))
        case 4 where payloadLength % 32 == 0:
            record = .intent(
                stride(from: 0, to: payloadLength, by: 32).map { offset in
                    KeyDigest(bytes: UnsafeRawBufferPointer(rebasing: payload[offset..<(offset + 32)]))
                }
            )
        case 5 where payloadLength == 0:
            record = .commit
        default:
            return nil
        }
        return (record, length)
    }
}

/// The append-only file of ``JournalRecord``s that every process sharing a cache directory
/// replays, so that all of them agree on which entries exist, their sizes and their order of use.
///
/// Only a process holding the directory's lock appends, and it first reads whatever others
/// appended, so records are never interleaved; a record torn by a crash can only be the last
/// one, and the next holder of the lock cuts it off. When the journal grows much larger than
/// the entries it describes, it is rewritten to a new file that replaces it by rename; the other
/// processes notice the new file and read it from the start.
struct Journal {
    static let magic: [UInt8] = Array("CCJ1".utf8)

    let path: String
    private(set) var descriptor: Int32
    /// Why this process may not write the journal (`EROFS` or `EACCES`), or 0 if it may. A
    /// read-only cache (a read-only file system, or a journal this user may not write) is read
    /// as it is: nothing is appended, cut off or rewritten.
    private let writeError: Int32

    /// Whether this process may write the journal.
    var isWritable: Bool { self.writeError == 0 }

    /// Throws, naming the cause, unless this process may write the journal.
    func checkWritable() throws(CacheError) {
        guard self.isWritable else {
            throw FileIO.error("change the cache, whose journal is", self.path, self.writeError)
        }
    }
    private var fileID: (device: UInt64, inode: UInt64)
    /// How far this process has read and applied.
    private(set) var offset: Int

    /// Opens the journal at `path`, creating it if needed. The caller holds the lock.
    init(path: String) throws(CacheError) {
        self.path = path
        (self.descriptor, self.writeError) = try FileIO.openForUpdateOrReading(path)
        self.fileID = (0, 0)
        self.offset = 0
        self.fileID = try Self.fileID(of: self.descriptor, path: path)
        try self.writeMagicIfEmpty()
        self.offset = Self.magic.count
    }

    /// Whether the file was just created, holding no record yet.
    var isEmpty: Bool {
        get throws(CacheError) { try FileIO.size(of: self.descriptor, path: self.path).size <= Self.magic.count }
    }

    /// Whether another process replaced the journal by a rewritten one since it was opened.
    func isReplaced() throws(CacheError) -> Bool {
        var status = stat()
        guard stat(self.path, &status) == 0 else {
            if errno == ENOENT { return true }
            throw FileIO.error("stat", self.path, errno)
        }
        return (UInt64(status.st_dev), UInt64(status.st_ino)) != self.fileID
    }

    /// Opens the current journal file and starts reading it from the beginning. The old
    /// descriptor is closed only once the new one is open: if opening fails, this journal keeps
    /// a descriptor that is still its own (closing it first, then failing, would leave a number
    /// that a later close could take from someone else).
    mutating func reopen() throws(CacheError) {
        let fresh = try Journal(path: self.path)
        FileIO.closeDescriptor(self.descriptor)
        self = fresh
    }

    /// Reads the records appended since the last call. A damaged or torn record ends the
    /// journal: it and anything after it are cut off (the caller holds the lock).
    mutating func readNew() throws(CacheError) -> [JournalRecord] {
        let size = try FileIO.size(of: self.descriptor, path: self.path).size
        guard size > self.offset else { return [] }
        var bytes = [UInt8](repeating: 0, count: size - self.offset)
        let read = try FileIO.readFully(self.descriptor, into: &bytes, at: self.offset, path: self.path)
        var records: [JournalRecord] = []
        var position = 0
        bytes.withUnsafeBytes { buffer in
            let valid = UnsafeRawBufferPointer(rebasing: buffer[0..<read])
            while let (record, length) = JournalRecord.decode(UnsafeRawBufferPointer(rebasing: valid[position...])) {
                records.append(record)
                position += length
            }
        }
        self.offset += position
        if self.offset < size, self.isWritable {
            try FileIO.truncate(self.descriptor, to: self.offset, path: self.path)
        }
        return records
    }

    /// Appends `records` at the end. The caller holds the lock and has read everything before.
    mutating func append(_ records: [JournalRecord]) throws(CacheError) {
        guard !records.isEmpty else { return }
        try self.checkWritable()
        var bytes: [UInt8] = []
        for record in records { record.encode(into: &bytes) }
        do {
            try FileIO.writeAll(self.descriptor, bytes, at: self.offset, path: self.path)
        } catch {
            // Leave no partial record behind for the next reader to trip over.
            try? FileIO.truncate(self.descriptor, to: self.offset, path: self.path)
            throw error
        }
        self.offset += bytes.count
    }

    /// Replaces the journal with one that holds only `records`, by writing a new file and
    /// renaming it over the old one.
    mutating func rewrite(with records: [JournalRecord], durably: Bool) throws(CacheError) {
        let temporary = self.path + ".new"
        _ = try FileIO.removeFile(temporary)
        let descriptor = try FileIO.create(temporary)
        defer { FileIO.closeDescriptor(descriptor) }
        var bytes = Self.magic
        for record in records { record.encode(into: &bytes) }
        do {
            try FileIO.writeAll(descriptor, bytes, at: nil, path: temporary)
            if durably { try FileIO.synchronize(descriptor, path: temporary) }
            try FileIO.move(temporary, to: self.path)
        } catch {
            _ = try? FileIO.removeFile(temporary)
            throw error
        }
        try self.reopen()
        self.offset = bytes.count
    }

    func close() {
        FileIO.closeDescriptor(self.descriptor)
    }

    private func writeMagicIfEmpty() throws(CacheError) {
        let size = try FileIO.size(of: self.descriptor, path: self.path).size
        guard self.isWritable else {
            // A read-only journal that is empty or not ours cannot be started afresh.
            if size > 0 { return }
            throw FileIO.error("start", self.path, self.writeError)
        }
        if size == 0 {
            try FileIO.writeAll(self.descriptor, Self.magic, at: 0, path: self.path)
            return
        }
        var first = [UInt8](repeating: 0, count: Self.magic.count)
        let read = try FileIO.readFully(self.descriptor, into: &first, at: 0, path: self.path)
        if read < Self.magic.count || first != Self.magic {
            // Not a journal of ours: start a new, empty one (the entries are rebuilt from files).
            try FileIO.truncate(self.descriptor, to: 0, path: self.path)
            try self.writeMagicIfEmpty()
        }
    }

    private static func fileID(of descriptor: Int32, path: String) throws(CacheError) -> (device: UInt64, inode: UInt64)
    {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw FileIO.error("stat", path, errno) }
        return (UInt64(status.st_dev), UInt64(status.st_ino))
    }
}
