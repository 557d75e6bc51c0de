import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A cache of bytes in a directory: persistent across launches, within its size limit whenever a
/// call returns, safe against crashes, and shared safely by several processes.
///
/// ```swift
/// let cache = try DiskCache(directory: URL(filePath: "/var/cache/myapp"))
/// try cache.set(imageData, forKey: url.absoluteString, metadata: responseHead)
/// if let entry = try cache.entry(forKey: url.absoluteString) { use(entry.data, entry.metadata) }
/// ```
///
/// **Layout.** Each entry is one file, `entries/<first two hex digits>/<SHA-256 of the key>`,
/// holding a checked header, the key, the metadata and the body. An append-only journal records
/// which entries exist, their sizes and their order of use; every process replays it.
///
/// **Never a wrong answer.** Files are written under a temporary name and renamed into place,
/// so a reader sees the old file or the new one. A get checks the file's size against its
/// header, the header's checksum and the key; a truncated, damaged or foreign file is read as
/// no entry and removed.
///
/// **Strays.** Files that the journal does not know, and entries whose files are gone, are
/// fixed by a sweep that the first changes after opening make a step at a time; see ``sweep()``.
///
/// **Limits.** A set evicts least recently used entries until the total size and count are
/// within the limits before it returns; opening a cache applies the limits too. Sizes count the
/// space files take on disk, in whole allocation units.
///
/// **Trust.** A directory of the cache that another user owns, or that others may write, is
/// refused when the cache opens; see <doc:DiskTier>. A cache that this user may not write (a
/// read-only file system) opens read-only: gets work, changes throw.
///
/// **Processes.** Changes are made under an exclusive `flock` on the directory's lock file,
/// after reading what other processes appended to the journal. Before a writer renames or
/// removes files, it records its intent; if it dies before it commits, the next writer finds the
/// open intent and records what the files really hold.
///
/// Gets take no lock and write nothing but an in-memory note of the access, which the next
/// change writes to the journal.
public final class DiskCache: DataCaching {
    /// An entry read back from the cache.
    public typealias Entry = DataCacheEntry

    /// What the cache knows of an entry without reading it, for listings.
    public struct EntryInfo: Hashable, Sendable {
        /// The key it was stored under.
        public var key: String
        /// The space its file takes (body, metadata, key and header): its length rounded up to
        /// whole allocation units of the file system, as the size limit counts it.
        public var size: Int
        /// When it was stored.
        public var created: Date
        /// When it was last read or stored, as far as the journal knows.
        public var lastAccessed: Date
    }

    /// The directory that holds the cache.
    public let directory: URL
    /// The configuration the cache was opened with.
    public let configuration: Configuration

    let store: DiskStore
    /// The file system's allocation unit: an entry counts its file's length in whole units.
    let allocationUnit: Int
    private let state: Mutex<DiskStore.State>
    /// The latest access to each entry that gets noted, written to the journal by the next
    /// change, in order of time.
    private let accesses = Mutex<[KeyDigest: Int64]>([:])

    /// Opens the cache in `directory`, creating the directory if needed, and applies the limits.
    ///
    /// - Parameters:
    ///   - directory: Where the cache lives. It is created with permissions 0700.
    ///   - configuration: Limits and durability; see ``Configuration`` for the defaults.
    ///   - now: The wall clock that dates entries. Default: the system's. Tests inject their own.
    /// - Throws: ``CacheError`` if the configuration is invalid or the directory cannot be used.
    public init(
        directory: URL,
        configuration: Configuration = Configuration(),
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws(CacheError) {
        try configuration.validate()
        self.directory = directory
        self.configuration = configuration
        self.store = DiskStore(root: directory.standardizedFileURL.path, configuration: configuration, now: now)
        let state = try self.store.open()
        self.allocationUnit = state.index.allocationUnit
        self.state = Mutex(state)
    }

    deinit {
        // Uses not yet in the journal go there, unless the directory was deleted or made again
        // since: its entries went with it, and a cache going away does not make it again.
        let hasAccesses = self.accesses.withLock { !$0.isEmpty }
        if hasAccesses, (try? self.isLockingCurrentLockFile) == true {
            try? self.flushAccesses()
        }
        self.state.withLock { state in state.close() }
    }

    // MARK: - Reading

    /// The entry stored for `key` with its metadata, or `nil`. The body of an entry file of
    /// 8 MiB or more is mapped from the file rather than read.
    ///
    /// - Throws: ``CacheError`` if the file exists but cannot be read (permissions, I/O error).
    ///   A damaged file is not an error: it is removed and `nil` is returned.
    public func entry(forKey key: String) throws(CacheError) -> Entry? {
        let digest = KeyDigest(key: key)
        guard let descriptor = try self.store.openEntry(digest) else { return nil }
        let reading: EntryFile.Reading
        do {
            defer { FileIO.closeDescriptor(descriptor) }
            reading = try EntryFile.read(descriptor, path: self.store.path(of: digest), expectedKey: key)
        }
        switch reading {
        case .missing:
            return nil
        case .invalid:
            // Not an entry either way; a cache that cannot remove it (read-only) still answers.
            try? self.removeIfInvalid(digest)
            return nil
        case .valid(let contents):
            let nanoseconds = self.store.nanoseconds(self.store.now())
            if self.store.isExpired(created: contents.created, now: nanoseconds) {
                try? self.remove([digest])
                return nil
            }
            try self.noteAccess(digest, at: nanoseconds)
            return Entry(
                key: contents.key,
                data: contents.body,
                metadata: contents.metadata,
                created: DiskStore.date(contents.created)
            )
        }
    }

    /// Whether a whole, unexpired entry is stored for `key`. Does not count as a use.
    ///
    /// - Throws: ``CacheError`` if the entry's file exists but cannot be opened or read.
    public func contains(_ key: String) throws(CacheError) -> Bool {
        try self.prefix(forKey: key) != nil
    }

    /// Whether an entry may be stored for `key`: `false` only when the key's file is not there,
    /// which one open tells, without the lock, a read of the file or a write to the journal.
    /// An error (too many open files, say) answers `true`, for the read to report.
    public func mayContain(_ key: String) -> Bool {
        do throws(CacheError) {
            guard let descriptor = try self.store.openEntry(KeyDigest(key: key)) else { return false }
            FileIO.closeDescriptor(descriptor)
            return true
        } catch {
            return true
        }
    }

    /// The metadata stored for `key` and the size of its body, read without the body; `nil` if
    /// no whole, unexpired entry is stored for `key`. Does not count as a use.
    ///
    /// For tools that list what a cache holds without reading every body.
    ///
    /// - Throws: ``CacheError`` if the entry's file exists but cannot be opened or read.
    public func metadata(forKey key: String) throws(CacheError) -> (metadata: Data, bodySize: Int)? {
        guard let contents = try self.prefix(forKey: key) else { return nil }
        let prefixSize = EntryFile.headerSize + contents.key.utf8.count + contents.metadata.count
        return (contents.metadata, contents.fileSize - prefixSize)
    }

    /// The header, key and metadata of the whole, unexpired entry stored for `key`, or `nil`.
    private func prefix(forKey key: String) throws(CacheError) -> EntryFile.Contents? {
        let digest = KeyDigest(key: key)
        guard let descriptor = try self.store.openEntry(digest) else { return nil }
        defer { FileIO.closeDescriptor(descriptor) }
        guard case .valid(let contents) = try EntryFile.readPrefix(descriptor, path: self.store.path(of: digest)),
            contents.key == key,
            !self.store.isExpired(created: contents.created, now: self.store.nanoseconds(self.store.now()))
        else {
            return nil
        }
        return contents
    }

    // MARK: - Writing

    /// Stores `data` and `metadata` for `key`, replacing any entry, then evicts least recently
    /// used entries until the limits hold.
    ///
    /// An entry larger than the whole size limit is not stored, and any entry stored before for
    /// `key` is removed, so a get never returns an outdated value.
    ///
    /// - Throws: ``CacheError/Code/outOfSpace`` if the disk is full, other ``CacheError``s if the
    ///   directory cannot be written. Nothing partial is left behind, and the previous entry for
    ///   `key`, if any, is still there.
    public func set(_ data: Data, forKey key: String, metadata: Data) throws(CacheError) {
        let digest = KeyDigest(key: key)
        let created = self.store.nanoseconds(self.store.now())
        let prefix = EntryFile.prefix(
            key: key,
            metadata: metadata,
            bodyLength: data.count,
            bodyChecksum: BodyChecksum.of(data),
            created: created
        )
        let size = prefix.count + data.count
        guard self.fitsInLimit(size) else {
            try self.removeValue(forKey: key)
            return
        }
        let temporary = try self.store.writeTemporaryFile(prefix, data)
        try self.commit(temporary, digest: digest, key: key, size: size, created: created)
    }

    /// Whether a file of `length` bytes, counted in whole allocation units, fits in the size
    /// limit at all.
    func fitsInLimit(_ length: Int) -> Bool {
        guard let space = DiskIndex.space(of: length, unit: self.allocationUnit) else { return false }
        return space <= self.configuration.sizeLimit
    }

    /// Renames a complete temporary file into place as the entry for `key`, records it, and
    /// evicts until the limits hold. On failure the temporary file is removed.
    func commit(_ temporary: String, digest: KeyDigest, key: String, size: Int, created: Int64) throws(CacheError) {
        do {
            try self.transaction { state throws(CacheError) in
                try self.store.append([.intent([digest])], to: &state)
                try self.store.moveIntoPlace(temporary, digest, &state)
                try self.store.append(
                    [.set(digest, key: key, size: size, created: created, accessed: created), .commit],
                    to: &state
                )
                try self.store.evictToLimits(&state)
            }
        } catch {
            _ = try? FileIO.removeFile(temporary)
            throw error
        }
    }

    /// Removes the entry for `key`; returns whether there was one.
    ///
    /// - Throws: ``CacheError`` if the directory cannot be changed, or if the entry's file is
    ///   one this user may not remove (another user, such as root, left it): the cache forgets
    ///   it all the same, and the error names it.
    @discardableResult
    public func removeValue(forKey key: String) throws(CacheError) -> Bool {
        let digest = KeyDigest(key: key)
        return try self.transaction { state throws(CacheError) in
            let existed = state.index.entry(for: digest) != nil
            try Self.report(kept: try self.store.remove([digest], &state))
            return existed
        }
    }

    /// Removes every entry, and any stray file in the entries directory.
    ///
    /// - Throws: ``CacheError`` if the directory cannot be changed. Files this user may not
    ///   remove (another user, such as root, left them) are skipped: the rest is removed, and
    ///   then the error names them.
    public func removeAll() throws(CacheError) {
        try self.transaction { state throws(CacheError) in
            var kept = try self.store.remove(state.index.entries.map(\.digest), &state)
            // Files the journal does not know, in the subdirectories only: a link in a
            // subdirectory's place is removed itself, never followed.
            kept += try self.store.forEachSubdirectory { subdirectory, directory throws(CacheError) in
                let path = "\(self.store.entries)/\(KeyDigest.hexadecimal(subdirectory))"
                for name in try FileIO.names(in: directory, path: path) {
                    do throws(CacheError) {
                        try FileIO.removeFile(named: name, in: directory, path: "\(path)/\(name)")
                    } catch  where error.errno == EACCES || error.errno == EPERM {
                        kept.append("\(path)/\(name)")
                    }
                }
            }
            // A compaction only: the journal as appended already says that every entry is gone.
            // On a full disk it waits for a later change (an empty cache's journal may need
            // space to be written anew, and no space is freed for it).
            do throws(CacheError) {
                try state.journal.rewrite(with: [], durably: self.configuration.isDurable)
            } catch  where error.code == .outOfSpace {}
            try Self.report(kept: kept)
        }
    }

    /// Throws an error that names the files in `kept`, which this user could not remove.
    private static func report(kept: [String]) throws(CacheError) {
        guard let first = kept.first else { return }
        let (more, them) = kept.count > 1 ? (" and \(kept.count - 1) more", "them") : ("", "it")
        throw CacheError(
            .fileSystem,
            "Could not remove \(first)\(more): permission denied. Another user (perhaps root) left \(them) in "
                + "the cache, which no longer counts \(them); the rest was done. Remove \(them) as that user "
                + "(for example with sudo rm -r).",
            path: first,
            errno: EACCES
        )
    }

    /// Removes the entries stored before `date`; returns how many.
    ///
    /// - Throws: ``CacheError`` if the lock or the journal cannot be used, the cache is read-only (code `fileSystem`), or some
    ///   entry files could not be removed (the others are, and the error names what was left).
    @discardableResult
    public func removeEntries(createdBefore date: Date) throws(CacheError) -> Int {
        let limit = self.store.nanoseconds(date)
        return try self.removeEntries { $0.created < limit }
    }

    /// Removes the entries not read or stored since `date`; returns how many.
    ///
    /// - Throws: as ``removeEntries(createdBefore:)``.
    @discardableResult
    public func removeEntries(notAccessedSince date: Date) throws(CacheError) -> Int {
        let limit = self.store.nanoseconds(date)
        return try self.removeEntries { $0.accessed < limit }
    }

    /// Evicts least recently used entries until the total size is at most `size`; returns how many.
    ///
    /// - Throws: ``CacheError/Code/invalidArgument`` if `size` is negative; otherwise as
    ///   ``removeEntries(createdBefore:)``.
    @discardableResult
    public func trim(toSize size: Int) throws(CacheError) -> Int {
        guard size >= 0 else { throw .invalidArgument("The size to trim to must not be negative (got \(size)).") }
        return try self.transaction { state throws(CacheError) in
            let victims = state.index.victims(toFitSize: size, count: .max)
            try Self.report(kept: try self.store.remove(victims, &state))
            return victims.count
        }
    }

    // MARK: - Inspecting

    /// The space the entries' files take, in bytes counted in whole allocation units.
    ///
    /// - Throws: ``CacheError`` with code `fileSystem` if the lock cannot be taken or the journal
    ///   cannot be read.
    public var totalSize: Int {
        get throws(CacheError) { try self.transaction(changing: false) { state in state.index.totalSize } }
    }

    /// The number of entries.
    ///
    /// - Throws: as ``totalSize``.
    public var count: Int {
        get throws(CacheError) { try self.transaction(changing: false) { state in state.index.count } }
    }

    /// Every entry, least recently used first, as the journal knows them (no file is read).
    ///
    /// - Throws: as ``totalSize``.
    public func entries() throws(CacheError) -> [EntryInfo] {
        try self.transaction(changing: false) { state in
            state.index.entriesByUse.map { entry in
                EntryInfo(
                    key: entry.key,
                    size: entry.size,
                    created: DiskStore.date(entry.created),
                    lastAccessed: DiskStore.date(entry.accessed)
                )
            }
        }
    }

    // MARK: - Transactions

    /// Runs `body` with the in-process lock and the directory's lock held, after catching up with
    /// the journal and writing the accesses noted since the last change.
    ///
    /// A transaction that is `changing` the cache throws at once, before anything is touched, if
    /// the cache is read-only; one that only reads runs, and on a read-only cache writes nothing
    /// (the accesses are dropped, and no sweep or compaction runs).
    private func transaction<Result: Sendable>(
        changing: Bool = true,
        _ body: (inout DiskStore.State) throws(CacheError) -> Result
    ) throws(CacheError) -> Result {
        let accesses = self.accesses.withLock { accesses in
            defer { accesses.removeAll(keepingCapacity: true) }
            return accesses.sorted { $0.value < $1.value }.map { JournalRecord.access($0.key, accessed: $0.value) }
        }
        return try self.state.withLock { state throws(CacheError) -> Result in
            try self.store.lock(&state)
            defer { FileIO.unlock(state.lockDescriptor) }
            try self.store.catchUp(&state)
            if changing { try state.journal.checkWritable() }
            guard state.journal.isWritable else { return try body(&state) }
            // Uses only order eviction: on a full disk they are dropped, so that the change
            // (perhaps one that frees space) can still be made.
            do throws(CacheError) {
                try self.store.append(accesses, to: &state)
            } catch  where error.code == .outOfSpace {}
            let result = try body(&state)
            if state.sweepStep < DiskStore.sweepSteps {
                // A failed step is retried by the next explicit sweep; the change itself was made.
                _ = try? self.store.sweep(step: state.sweepStep, &state)
                state.sweepStep += 1
            }
            // The change was made: a compaction that fails (a full disk) is tried again later.
            try? self.store.compactIfLarge(&state)
            return result
        }
    }

    // MARK: - Sweeping

    /// Makes the files in the directory agree with the journal: removes files the journal does
    /// not know, and forgets entries whose files are gone; returns how many it fixed.
    ///
    /// Such strays come from outside the cache: files copied in or deleted by hand, or a journal
    /// deleted while its entries stayed. Each cache sweeps once after opening, a step with each
    /// of its first 257 changes, so that opening never waits for a directory scan; this call
    /// sweeps the whole directory now, one subdirectory per lock, for tools and tests.
    ///
    /// - Throws: ``CacheError`` if the lock or the journal cannot be used, the cache is read-only (code `fileSystem`), or a
    ///   subdirectory cannot be listed or changed; the subdirectories before it stay swept.
    @discardableResult
    public func sweep() throws(CacheError) -> Int {
        var fixed = 0
        for step in 0..<DiskStore.sweepSteps {
            fixed += try self.transaction { state throws(CacheError) in
                state.sweepStep = DiskStore.sweepSteps  // this sweep does the opening's sweep too
                return try self.store.sweep(step: step, &state)
            }
        }
        return fixed
    }

    func remove(_ digests: [KeyDigest]) throws(CacheError) {
        _ = try self.transaction { state throws(CacheError) in try self.store.remove(digests, &state) }
    }

    private func removeEntries(where isMatch: @escaping (DiskIndex.Entry) -> Bool) throws(CacheError) -> Int {
        try self.transaction { state throws(CacheError) in
            let digests = state.index.digests(where: isMatch)
            try Self.report(kept: try self.store.remove(digests, &state))
            return digests.count
        }
    }

    /// Removes the file of `digest` if it is still not a whole entry of its own.
    func removeIfInvalid(_ digest: KeyDigest) throws(CacheError) {
        try self.transaction { state throws(CacheError) in
            // The whole file, body included: a damaged body leaves the header's checksum whole.
            if let descriptor = try self.store.openEntry(digest) {
                defer { FileIO.closeDescriptor(descriptor) }
                if case .valid(let contents) = try EntryFile.read(
                    descriptor,
                    path: self.store.path(of: digest),
                    expectedKey: nil
                ), KeyDigest(key: contents.key) == digest {
                    return  // replaced by a whole entry in the meantime
                }
            }
            try self.store.remove([digest], &state)
        }
    }

    /// Whether the descriptor the cache locks is that of the directory's lock file now.
    var isLockingCurrentLockFile: Bool {
        get throws(CacheError) {
            try self.state.withLock { state throws(CacheError) in
                try FileIO.isFile(state.lockDescriptor, at: self.store.root + "/lock")
            }
        }
    }

    // MARK: - Accesses

    func noteAccess(_ digest: KeyDigest, at nanoseconds: Int64) throws(CacheError) {
        let pending = self.accesses.withLock { accesses in
            accesses[digest] = nanoseconds
            return accesses.count
        }
        if pending >= 1024 { try self.flushAccesses() }
    }

    private func flushAccesses() throws(CacheError) {
        try self.transaction(changing: false) { _ in }
    }
}
