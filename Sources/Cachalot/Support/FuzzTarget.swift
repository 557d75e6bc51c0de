import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One entry point per parser of untrusted bytes, for the fuzzers in `Fuzz/` and for the tests
/// that replay their seeds and the inputs that once crashed.
///
/// Each entry feeds its bytes to a parser and, where the parse succeeds, does with the result
/// what a caller does (round-trips it, reads its fields, computes freshness at a fixed date),
/// checking with `precondition` the invariants its comment names. An entry never throws: a
/// broken invariant, a trap or a memory error is a crash, which is what a fuzzer looks for.
///
/// Not API: the fuzzers and the tests reach it with `@_spi(Fuzzing) import Cachalot`.
@_spi(Fuzzing) public enum FuzzTarget {
    /// The present that freshness is computed at: 2025-06-15, a fixed date so that a run
    /// replays the same way.
    static let now = Date(timeIntervalSince1970: 1_750_000_000)

    // MARK: - Disk

    /// Reads `bytes` as the whole of a disk entry's file (``EntryFile``), in memory and from a
    /// file as a get and a listing do.
    ///
    /// Invariants, for bytes that read as a valid entry:
    /// - the file is the header, key, metadata and body, nothing more, and the body's checksum
    ///   is the one the header records;
    /// - read from a file, by the whole (a get) or by its prefix (a listing), it is the same
    ///   entry; a file whose prefix does not lay out is not valid when read whole either;
    /// - if its key is valid UTF-8, writing the entry again gives back the same bytes, and it is
    ///   found for its own key; if not, the key it reads as does not find it.
    ///
    /// The bytes are read as they are, then with both checksums made to hold, as someone who
    /// crafts a file can make them (FNV-1a and CRC are no secret): so that the fuzzer reaches
    /// what comes after the checks, not only the checks.
    public static func entryFile(_ bytes: UnsafeRawBufferPointer) {
        Self.checkEntryFile(bytes)
        if let fixed = Self.entryFileWithChecksumsFixed(bytes), !fixed.elementsEqual(bytes) {
            fixed.withUnsafeBytes { Self.checkEntryFile($0) }
        }
    }

    /// `bytes` with the body's and the header's checksums made to hold, or `nil` if the file is
    /// shorter than what its header declares before the body.
    private static func entryFileWithChecksumsFixed(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        guard bytes.count >= EntryFile.headerSize else { return nil }
        var fixed = Array(bytes)
        let keyLength = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
        let metadataLength = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        let metadataEnd = EntryFile.headerSize + keyLength + metadataLength
        guard metadataEnd <= bytes.count else { return nil }
        fixed.withUnsafeMutableBytes { file in
            let body = BodyChecksum.of(UnsafeRawBufferPointer(rebasing: file[metadataEnd...]))
            file.storeBytes(of: body.littleEndian, toByteOffset: 12, as: UInt32.self)
            let header = Checksum.of(
                UnsafeRawBufferPointer(rebasing: file[0..<32]),
                UnsafeRawBufferPointer(rebasing: file[EntryFile.headerSize..<metadataEnd])
            )
            file.storeBytes(of: header.littleEndian, toByteOffset: 32, as: UInt64.self)
        }
        return fixed
    }

    private static func checkEntryFile(_ bytes: UnsafeRawBufferPointer) {
        let reading = EntryFile.contents(of: bytes, expectedKey: nil) { Data(bytes[$0]) }
        let (fromFile, prefix) = Self.readEntryFile(bytes)
        guard case .valid(let contents) = reading else {
            precondition(!fromFile.isValid, "an entry read from a file is valid when the same bytes are not")
            return
        }
        guard case .valid(let read) = fromFile, case .valid(let listed) = prefix else {
            preconditionFailure("a valid entry is not valid when read from a file")
        }
        let keyLength = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
        precondition(
            contents.fileSize == bytes.count
                && EntryFile.headerSize + keyLength + contents.metadata.count + contents.body.count == bytes.count,
            "the parts of an entry are not its file"
        )
        precondition(
            BodyChecksum.of(contents.body) == contents.bodyChecksum,
            "a valid entry's body does not match its checksum"
        )
        precondition(read.isSame(as: contents), "an entry read from a file differs from the same bytes read in memory")
        precondition(
            listed.isSame(as: contents, body: false),
            "an entry's prefix, as a listing reads it, differs from the whole entry"
        )
        let storedKey = bytes[EntryFile.headerSize..<(EntryFile.headerSize + keyLength)]
        let ownKey = EntryFile.contents(of: bytes, expectedKey: contents.key) { Data(bytes[$0]) }
        if contents.key.utf8.elementsEqual(storedKey) {
            let written =
                EntryFile.prefix(
                    key: contents.key,
                    metadata: contents.metadata,
                    bodyLength: contents.body.count,
                    bodyChecksum: contents.bodyChecksum,
                    created: contents.created
                ) + contents.body
            precondition(written.elementsEqual(bytes), "an entry written again differs from the bytes it was read from")
            precondition(ownKey.isValid, "an entry is not found for its own key")
        } else {
            precondition(!ownKey.isValid, "an entry whose key is not UTF-8 is found for the key it reads as")
        }
    }

    /// The entry in `bytes` read from a file, whole and by its prefix, as the disk tier reads
    /// them: through ``EntryFile/read(_:path:expectedKey:)`` and ``EntryFile/readPrefix(_:path:)``.
    private static func readEntryFile(_ bytes: UnsafeRawBufferPointer) -> (EntryFile.Reading, EntryFile.Reading) {
        Self.withTemporaryFile(holding: bytes) { descriptor, path throws(CacheError) in
            let whole = try EntryFile.read(descriptor, path: path, expectedKey: nil)
            let prefix = try EntryFile.readPrefix(descriptor, path: path)
            if case .valid = prefix {
                precondition(
                    EntryFile.layout(of: bytes, fileSize: bytes.count) != nil,
                    "an entry's prefix lays out when the whole file does not"
                )
            } else {
                precondition(!whole.isValid, "an entry is valid when its prefix is not")
            }
            return (whole, prefix)
        }
    }

    /// Reads `bytes` as the records of a journal after its magic, as each process replays them:
    /// one by one in memory, and through ``Journal/readNew()`` from a journal file.
    ///
    /// Invariants, for each record that decodes:
    /// - encoded again, it decodes to itself, with the length it was encoded in;
    /// - if its key (a set's) is valid UTF-8, it encodes to exactly the bytes it was read from;
    /// - the journal file gives the same records, and is cut after the last whole one.
    ///
    /// The bytes are read as they are, then with the checksum of each whole record made to
    /// hold, as someone who crafts a journal can make them.
    public static func journal(_ bytes: UnsafeRawBufferPointer) {
        Self.checkJournal(bytes)
        let fixed = Self.journalWithChecksumsFixed(bytes)
        if !fixed.elementsEqual(bytes) {
            fixed.withUnsafeBytes { Self.checkJournal($0) }
        }
    }

    /// `bytes` with the checksum of each record that its length says is whole made to hold.
    private static func journalWithChecksumsFixed(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var fixed = Array(bytes)
        fixed.withUnsafeMutableBytes { records in
            var position = 0
            while records.count - position >= 13 {
                let payloadLength = Int(
                    UInt32(littleEndian: records.loadUnaligned(fromByteOffset: position, as: UInt32.self))
                )
                guard payloadLength <= records.count - position - 13 else { break }
                let payloadEnd = position + 5 + payloadLength
                let checksum = Checksum.of(
                    UnsafeRawBufferPointer(rebasing: records[(position + 4)..<(position + 5)]),
                    UnsafeRawBufferPointer(rebasing: records[(position + 5)..<payloadEnd])
                )
                records.storeBytes(of: checksum.littleEndian, toByteOffset: payloadEnd, as: UInt64.self)
                position = payloadEnd + 8
            }
        }
        return fixed
    }

    private static func checkJournal(_ bytes: UnsafeRawBufferPointer) {
        var records: [JournalRecord] = []
        var position = 0
        while let (record, length) = JournalRecord.decode(UnsafeRawBufferPointer(rebasing: bytes[position...])) {
            let read = bytes[position..<(position + length)]
            var encoded: [UInt8] = []
            record.encode(into: &encoded)
            let decoded = encoded.withUnsafeBytes { JournalRecord.decode($0) }
            precondition(
                decoded?.record == record && decoded?.length == encoded.count,
                "a journal record encoded again does not decode to itself"
            )
            if case .set(_, let key, _, _, _) = record {
                let storedKey = read.dropFirst(5 + 56).dropLast(8)
                if key.utf8.elementsEqual(storedKey) {
                    precondition(encoded.elementsEqual(read), "a journal record encodes to other bytes than its own")
                }
            } else {
                precondition(encoded.elementsEqual(read), "a journal record encodes to other bytes than its own")
            }
            records.append(record)
            position += length
        }
        var file = Journal.magic
        file.append(contentsOf: bytes)
        file.withUnsafeBytes { file in
            Self.withTemporaryFile(holding: file) { descriptor, path throws(CacheError) in
                var journal = try Journal(path: path)
                defer { journal.close() }
                let replayed = try journal.readNew()
                precondition(replayed == records, "a journal file replays other records than its bytes decode to")
                let size = try FileIO.size(of: descriptor, path: path).size
                precondition(
                    size == Journal.magic.count + position && journal.offset == size,
                    "a journal file is not cut after its last whole record"
                )
            }
        }
    }

    /// Runs `body` with a new temporary file that holds `bytes`, removed afterwards. Any error
    /// is a crash: the fuzzers look at parsing, and a temporary file cannot fail to work.
    private static func withTemporaryFile<Result>(
        holding bytes: UnsafeRawBufferPointer,
        _ body: (Int32, String) throws(CacheError) -> Result
    ) -> Result {
        var template = Array((NSTemporaryDirectory() + "/cachalot-fuzz-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        precondition(descriptor >= 0, "no temporary file: \(String(cString: strerror(errno)))")
        let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer {
            FileIO.closeDescriptor(descriptor)
            unlink(path)
        }
        do {
            try FileIO.writeAll(descriptor, bytes, at: 0, path: path)
            return try body(descriptor, path)
        } catch {
            preconditionFailure("the temporary file \(path) failed: \(error)")
        }
    }
}

extension EntryFile.Reading {
    fileprivate var isValid: Bool {
        if case .valid = self { return true }
        return false
    }
}

extension EntryFile.Contents {
    /// Whether both hold the same entry (with or without comparing the bodies).
    fileprivate func isSame(as other: Self, body: Bool = true) -> Bool {
        self.key == other.key && self.metadata == other.metadata && self.created == other.created
            && self.fileSize == other.fileSize && self.bodyChecksum == other.bodyChecksum
            && (!body || self.body == other.body)
    }
}
