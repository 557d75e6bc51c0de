import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The disk cache's directory, journal and index, and every step that changes them. Its
/// methods take the state as `inout`: ``DiskCache`` calls them with its locks held.
struct DiskStore: Sendable {
    /// What the process knows of the directory; guarded by ``DiskCache``'s mutex and, while it
    /// changes, by the directory's lock.
    struct State: ~Copyable {
        var journal: Journal
        var index: DiskIndex
        var lockDescriptor: Int32
        /// The next step of the sweep that follows opening; see ``DiskStore/sweep(step:_:)``.
        var sweepStep = 0
        /// Descriptors of `entries/`'s subdirectories, by number (-1 where none is open), kept
        /// open from one change to the next; see ``DiskStore/inSubdirectory(_:creating:_:_:)``.
        var subdirectories = [Int32](repeating: -1, count: 256)

        /// Closes what the state holds open.
        func close() {
            self.journal.close()
            FileIO.closeDescriptor(self.lockDescriptor)
            for descriptor in self.subdirectories where descriptor >= 0 { FileIO.closeDescriptor(descriptor) }
        }
    }

    let root: String
    /// `<root>/entries`, where the entry files live.
    let entries: String
    /// Its UTF-8, from which entry paths are built.
    private let entriesBytes: [UInt8]
    let configuration: DiskCache.Configuration
    let now: @Sendable () -> Date
    private let temporaryNumbers = Counter()
    /// Ends this store's temporary names: drawn once, not for every file.
    private let temporaryNonce = UInt64.random(in: 0...UInt64.max)
    private let entriesDirectory = EntriesDirectory()

    init(root: String, configuration: DiskCache.Configuration, now: @escaping @Sendable () -> Date) {
        self.root = root
        self.entries = root + "/entries"
        self.entriesBytes = Array(self.entries.utf8)
        self.configuration = configuration
        self.now = now
    }

    /// Opens the directory: creates what is missing, replays the journal (or rebuilds it from the
    /// files if it was lost), removes leftovers, and applies the limits.
    func open() throws(CacheError) -> State {
        try Self.makeDirectories(self.root)
        _ = try self.entriesDirectory.refreshIfReplaced(self.entries)
        try self.checkTrusted()
        let lockPath = self.root + "/lock"
        let lockDescriptor = try FileIO.openForUpdateOrReading(lockPath).descriptor
        do {
            // Whoever else could write the lock or the journal could hold the cache or rewrite it.
            try FileIO.checkTrusted(lockDescriptor, path: lockPath)
            try FileIO.lockExclusively(lockDescriptor, path: lockPath)
        } catch {
            FileIO.closeDescriptor(lockDescriptor)
            throw error
        }
        // Closing the lock's descriptor releases the lock; the error paths below rely on that.
        let journal: Journal
        do throws(CacheError) {
            journal = try Journal(path: self.root + "/journal")
            do throws(CacheError) {
                try FileIO.checkTrusted(journal.descriptor, path: journal.path)
            } catch {
                journal.close()
                throw error
            }
        } catch {
            FileIO.closeDescriptor(lockDescriptor)
            throw error
        }
        var state = State(
            journal: journal,
            index: DiskIndex(allocationUnit: FileIO.allocationUnit(of: self.root)),
            lockDescriptor: lockDescriptor
        )
        do {
            let isNew = try state.journal.isEmpty
            try self.catchUp(&state)
            // A read-only cache is read as the journal has it, and changed in nothing.
            guard state.journal.isWritable else {
                FileIO.unlock(lockDescriptor)
                return state
            }
            if isNew { try self.rebuildFromFiles(&state) }
            try self.removeLeftoverTemporaryFiles()
            try self.removeExpired(&state)
            try self.evictToLimits(&state)
        } catch {
            // The state's journal, which catching up may have reopened, is the one to close.
            state.close()
            throw error
        }
        FileIO.unlock(lockDescriptor)
        return state
    }

    /// Takes the directory's lock. If the directory was deleted (and perhaps made again by
    /// another process), the descriptor held locks a file nobody else can open: the current lock
    /// file is opened instead, creating the directories if needed, so that every process still
    /// locks the same file.
    func lock(_ state: inout State) throws(CacheError) {
        let path = self.root + "/lock"
        while true {
            try FileIO.lockExclusively(state.lockDescriptor, path: path)
            if try FileIO.isFile(state.lockDescriptor, at: path) { return }
            FileIO.unlock(state.lockDescriptor)
            try Self.makeDirectories(self.root)
            let current = try FileIO.openForUpdateOrReading(path).descriptor
            FileIO.closeDescriptor(state.lockDescriptor)
            state.lockDescriptor = current
        }
    }

    /// Applies what other processes appended, starts over if the journal was rewritten or
    /// deleted (rebuilding it from the files if it is empty), and settles an intent whose writer
    /// died before committing it.
    func catchUp(_ state: inout State) throws(CacheError) {
        if try state.journal.isReplaced() {
            try state.journal.reopen()
            state.index = DiskIndex(allocationUnit: state.index.allocationUnit)
            if try state.journal.isEmpty, state.journal.isWritable { try self.rebuildFromFiles(&state) }
        }
        for record in try state.journal.readNew() {
            state.index.apply(record)
        }
        // The lock is held: whoever wrote an uncommitted intent is gone (or failed here). On a
        // full disk it stays open, for the first change after space is freed to settle.
        if let digests = state.index.openIntent, state.journal.isWritable {
            do throws(CacheError) {
                try self.settle(digests, &state)
            } catch  where error.code == .outOfSpace {}
        }
    }

    /// Records what the files of `digests` really hold, then commits.
    func settle(_ digests: [KeyDigest], _ state: inout State) throws(CacheError) {
        var records: [JournalRecord] = []
        let now = self.nanoseconds(self.now())
        for digest in digests {
            switch try self.readEntryPrefix(digest) {
            case .valid(let contents) where KeyDigest(key: contents.key) == digest:
                records.append(.set(digest, contents, accessed: state.index.entry(for: digest)?.accessed ?? now))
            case .valid, .invalid:
                try self.removeEntryFile(digest, &state)
                records.append(.remove(digest))
            case .missing:
                records.append(.remove(digest))
            }
        }
        records.append(.commit)
        try self.append(records, to: &state)
    }

    func append(_ records: [JournalRecord], to state: inout State) throws(CacheError) {
        guard !records.isEmpty else { return }
        try state.journal.append(records)
        for record in records {
            state.index.apply(record)
        }
    }

    /// Removes the files of `digests` and records it, under an intent.
    ///
    /// On a full disk, where even the intent cannot be appended, the files are removed first
    /// and recorded after, so that freeing space never needs space: a crash in between leaves
    /// records of files that are gone, which a get reads as a miss and the sweep forgets.
    ///
    /// A file this user may not remove (one that another user, such as root, left in the
    /// cache) is forgotten all the same, since the cache cannot evict it; its path is returned
    /// for the caller to report, and the sweep tries it again.
    @discardableResult
    func remove(_ digests: [KeyDigest], _ state: inout State) throws(CacheError) -> [String] {
        guard !digests.isEmpty else { return [] }
        var isIntentRecorded = true
        do throws(CacheError) {
            try self.append([.intent(digests)], to: &state)
        } catch  where error.code == .outOfSpace {
            isIntentRecorded = false
        }
        var kept: [String] = []
        for digest in digests {
            if try !self.removeEntryFile(digest, &state) { kept.append(self.path(of: digest)) }
        }
        // Without an intent of its own, no commit: an intent left open before, if any, stays
        // open for the next change to settle.
        try self.append(digests.map { .remove($0) } + (isIntentRecorded ? [.commit] : []), to: &state)
        if self.configuration.isDurable {
            try FileIO.synchronizeDirectory(self.entries)
        }
        return kept
    }

    func evictToLimits(_ state: inout State) throws(CacheError) {
        let victims = state.index.victims(
            toFitSize: self.configuration.sizeLimit,
            count: self.configuration.countLimit ?? .max
        )
        try self.remove(victims, &state)
    }

    func removeExpired(_ state: inout State) throws(CacheError) {
        guard self.configuration.maximumAge != nil else { return }
        let now = self.nanoseconds(self.now())
        try self.remove(state.index.digests { self.isExpired(created: $0.created, now: now) }, &state)
    }

    /// Rewrites the journal when it holds more than four times what the live entries need.
    func compactIfLarge(_ state: inout State) throws(CacheError) {
        let live = state.index.count * 160 + 4096
        guard state.journal.offset > 1 << 20, state.journal.offset > 4 * live, state.index.openIntent == nil else {
            return
        }
        try state.journal.rewrite(with: state.index.compacted, durably: self.configuration.isDurable)
    }

    // MARK: - Files

    func path(of digest: KeyDigest) -> String {
        digest.path(under: self.entriesBytes)
    }

    /// Opens the file of `digest` for reading, or returns `nil` if there is none. On a miss, it
    /// looks again in `entries/` if the directory was deleted and made again since it was opened.
    func openEntry(_ digest: KeyDigest) throws(CacheError) -> Int32? {
        if let descriptor = try self.openEntry(digest, in: self.entriesDirectory.descriptor) {
            return descriptor
        }
        guard try self.entriesDirectory.refreshIfReplaced(self.entries) else { return nil }
        return try self.openEntry(digest, in: self.entriesDirectory.descriptor)
    }

    private func openEntry(_ digest: KeyDigest, in directory: Int32) throws(CacheError) -> Int32? {
        try digest.withRelativePath { relativePath throws(CacheError) in
            try FileIO.openForReading(relativePath, in: directory, path: self.path(of: digest))
        }
    }

    /// Reads the header, key and metadata of the file of `digest`, opened as ``openEntry(_:)``
    /// opens it.
    func readEntryPrefix(_ digest: KeyDigest) throws(CacheError) -> EntryFile.Reading {
        guard let descriptor = try self.openEntry(digest) else { return .missing }
        defer { FileIO.closeDescriptor(descriptor) }
        return try EntryFile.readPrefix(descriptor, path: self.path(of: digest))
    }

    /// Opens the subdirectory of `entries/` whose number is `subdirectory`, following no
    /// symbolic link; `nil` if there is none, or something else is in its place.
    func openSubdirectory(_ subdirectory: UInt8) throws(CacheError) -> Int32? {
        let name = KeyDigest.hexadecimal(subdirectory)
        return try FileIO.openDirectory(name, in: self.entriesDescriptor(), path: "\(self.entries)/\(name)")
    }

    /// Calls `body` with the open descriptor of the subdirectory of `entries/` numbered `number`,
    /// which stays open in `state` for the changes after this one: a change then opens no
    /// directory (an `openat2` and a `close`, about 4 µs on the project's machines, measured in
    /// C). `body` returns `nil` when it finds nothing (`ENOENT`); if the descriptor was kept
    /// from before, its directory may be gone since (deleted by hand, with `entries/` or
    /// alone), so the subdirectory is opened afresh and `body` called once more.
    ///
    /// With `creating`, a missing subdirectory is made, a symbolic link or a file in its place
    /// removed first, so that nothing is ever written through a link; without, there being none
    /// returns `nil`. Only a change, which holds the state, uses the descriptors: one is closed
    /// only when it is replaced, or when the cache goes.
    func inSubdirectory<Result>(
        _ number: UInt8,
        creating: Bool,
        _ state: inout State,
        _ body: (Int32) throws(CacheError) -> Result?
    ) throws(CacheError) -> Result? {
        let kept = state.subdirectories[Int(number)]
        if kept >= 0 {
            if let result = try body(kept) { return result }
            state.subdirectories[Int(number)] = -1
            FileIO.closeDescriptor(kept)
        }
        var directory = try self.openSubdirectory(number)
        if directory == nil, creating {
            let name = KeyDigest.hexadecimal(number)
            // `entries/` itself may be gone, deleted by hand.
            try Self.makeDirectories(self.root)
            let entries = try self.entriesDescriptor()
            _ = try? FileIO.removeFile(named: name, in: entries, path: "\(self.entries)/\(name)")
            if mkdirat(entries, name, 0o700) != 0 && errno != EEXIST {
                throw FileIO.error("create directory", "\(self.entries)/\(name)", errno)
            }
            directory = try self.openSubdirectory(number)
            guard directory != nil else { throw FileIO.error("open", "\(self.entries)/\(name)", ENOTDIR) }
        }
        guard let directory else { return nil }
        state.subdirectories[Int(number)] = directory
        return try body(directory)
    }

    /// The descriptor of `entries/`, opened again if the directory was deleted and made again.
    func entriesDescriptor() throws(CacheError) -> Int32 {
        _ = try self.entriesDirectory.refreshIfReplaced(self.entries)
        let descriptor = self.entriesDirectory.descriptor
        guard descriptor >= 0 else { throw FileIO.error("open", self.entries, ENOENT) }
        return descriptor
    }

    /// Removes the file of `digest`, relative to its subdirectory's descriptor, so that a
    /// symbolic link in the way is never followed. Returns `false` if this user may not remove
    /// it (permission denied), `true` if it is gone.
    @discardableResult
    func removeEntryFile(_ digest: KeyDigest, _ state: inout State) throws(CacheError) -> Bool {
        do throws(CacheError) {
            _ = try self.inSubdirectory(digest.subdirectory, creating: false, &state) {
                directory throws(CacheError) -> Bool? in
                try FileIO.removeFile(named: digest.hexadecimal, in: directory, path: self.path(of: digest))
                    ? true : nil
            }
            return true
        } catch  where error.errno == EACCES || error.errno == EPERM {
            return false
        }
    }

    /// Calls `body` with the number and open descriptor of each subdirectory of `entries/`
    /// that is a directory itself; a symbolic link or a file in a subdirectory's place is
    /// removed (the link, never what it points to). A subdirectory this user may not open (one
    /// that root made) is skipped; the paths of those are returned.
    @discardableResult
    func forEachSubdirectory(_ body: (UInt8, Int32) throws(CacheError) -> Void) throws(CacheError) -> [String] {
        let entries = try self.entriesDescriptor()
        var skipped: [String] = []
        for name in try FileIO.names(in: entries, path: self.entries) {
            guard let subdirectory = KeyDigest.subdirectoryNumber(name) else { continue }
            let directory: Int32?
            do throws(CacheError) {
                directory = try self.openSubdirectory(subdirectory)
            } catch  where error.errno == EACCES {
                skipped.append("\(self.entries)/\(name)")
                continue
            }
            guard let directory else {
                _ = try? FileIO.removeFile(named: name, in: entries, path: "\(self.entries)/\(name)")
                continue
            }
            defer { FileIO.closeDescriptor(directory) }
            try body(subdirectory, directory)
        }
        return skipped
    }

    /// Refuses the cache if another user could change it: the directory, `tmp/`, `entries/`
    /// and each of its subdirectories must belong to this process's user (or root) and be
    /// writable by no one else; see ``FileIO/checkTrusted(_:path:)``. `entries/` is checked
    /// whenever it is opened; a subdirectory made later is made by the cache itself, 0700.
    func checkTrusted() throws(CacheError) {
        for path in [self.root, self.root + "/tmp"] {
            let descriptor = try FileIO.openDirectory(atPath: path)
            defer { FileIO.closeDescriptor(descriptor) }
            try FileIO.checkTrusted(descriptor, path: path)
        }
        // The subdirectories by what `fstatat` says, without opening them: one root made may be
        // closed to this user, and what is not a directory is the sweep's to remove.
        let entries = try self.entriesDescriptor()
        for name in try FileIO.names(in: entries, path: self.entries) where KeyDigest.subdirectoryNumber(name) != nil {
            var status = stat()
            guard fstatat(entries, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            if (status.st_mode & S_IFMT) == S_IFDIR {
                try FileIO.checkTrusted(status, path: "\(self.entries)/\(name)")
            }
        }
    }

    static func makeDirectories(_ root: String) throws(CacheError) {
        try FileIO.makeDirectory(root)
        try FileIO.makeDirectory(root + "/tmp")
        try FileIO.makeDirectory(root + "/entries")
    }

    /// Creates a new temporary file for an entry being written; its name starts with this
    /// process's id, so that a later open can tell whether its writer is gone, and ends with this
    /// store's number, so that no other store, in this process or in an earlier one that had the
    /// same id, names a file alike.
    func createTemporaryFile() throws(CacheError) -> (descriptor: Int32, path: String) {
        let path = "\(self.root)/tmp/\(getpid())-\(self.temporaryNumbers.next())-\(self.temporaryNonce)"
        do {
            return (try FileIO.create(path), path)
        } catch  where error.errno == ENOENT {
            // The directory was deleted under us: make it again.
            try Self.makeDirectories(self.root)
            return (try FileIO.create(path), path)
        }
    }

    /// Writes the whole entry to a new temporary file and returns its path.
    func writeTemporaryFile(_ prefix: [UInt8], _ body: Data) throws(CacheError) -> String {
        let (descriptor, path) = try self.createTemporaryFile()
        defer { FileIO.closeDescriptor(descriptor) }
        do throws(CacheError) {
            try FileIO.writeAll(descriptor, prefix, body, path: path)
            if self.configuration.isDurable { try FileIO.synchronize(descriptor, path: path) }
        } catch {
            _ = try? FileIO.removeFile(path)
            throw error
        }
        return path
    }

    /// Renames the complete `temporary` file into place as the file of `digest`, relative to
    /// its subdirectory's descriptor. A subdirectory that is missing is made; a symbolic link or
    /// a file in its place is removed first, so that no entry is ever written through a link.
    func moveIntoPlace(_ temporary: String, _ digest: KeyDigest, _ state: inout State) throws(CacheError) {
        let moved = try self.inSubdirectory(digest.subdirectory, creating: true, &state) {
            directory throws(CacheError) -> Bool? in
            guard renameat(AT_FDCWD, temporary, directory, digest.hexadecimal) == 0 else {
                if errno == ENOENT { return nil }
                throw FileIO.error("rename", self.path(of: digest), errno)
            }
            if self.configuration.isDurable {
                try FileIO.synchronize(directory, path: "\(self.entries)/\(KeyDigest.hexadecimal(digest.subdirectory))")
            }
            return true
        }
        // Still nothing: the temporary file is gone.
        guard moved != nil else { throw FileIO.error("rename", self.path(of: digest), ENOENT) }
    }

    /// Removes temporary files left by writers that are gone: this process's earlier lives and
    /// processes that no longer run. Files of live processes are theirs to finish.
    func removeLeftoverTemporaryFiles() throws(CacheError) {
        let path = self.root + "/tmp"
        let directory = try FileIO.openDirectory(atPath: path)
        defer { FileIO.closeDescriptor(directory) }
        for name in try FileIO.names(in: directory, path: path) {
            let owner = name.split(separator: "-").first.flatMap { Int32($0) }
            if let owner, owner != getpid(), kill(owner, 0) == 0 || errno == EPERM { continue }
            if owner == getpid() { continue }
            try FileIO.removeFile(named: name, in: directory, path: "\(path)/\(name)")
        }
    }

    /// Rebuilds the journal from the entry files, for a directory whose journal was lost. The
    /// only directory scan the cache ever makes.
    func rebuildFromFiles(_ state: inout State) throws(CacheError) {
        var records: [JournalRecord] = []
        try self.forEachSubdirectory { subdirectory, directory throws(CacheError) in
            let directoryPath = "\(self.entries)/\(KeyDigest.hexadecimal(subdirectory))"
            for name in try FileIO.names(in: directory, path: directoryPath) {
                let path = "\(directoryPath)/\(name)"
                guard let digest = KeyDigest(hexadecimal: Substring(name)), digest.subdirectory == subdirectory,
                    case .valid(let contents) = try Self.readPrefix(name, in: directory, path: path),
                    KeyDigest(key: contents.key) == digest
                else {
                    try FileIO.removeFile(named: name, in: directory, path: path)
                    continue
                }
                records.append(.set(digest, contents, accessed: contents.created))
            }
        }
        try self.append(records, to: &state)
    }

    /// Reads the prefix of the entry file `name` in the open `directory`, not following a link.
    static func readPrefix(_ name: String, in directory: Int32, path: String) throws(CacheError) -> EntryFile.Reading {
        guard let descriptor = try FileIO.openForReading(name, in: directory, path: path) else { return .missing }
        defer { FileIO.closeDescriptor(descriptor) }
        return try EntryFile.readPrefix(descriptor, path: path)
    }

    // MARK: - Dates

    func isExpired(created: Int64, now: Int64) -> Bool {
        guard let maximumAge = self.configuration.maximumAge else { return false }
        // `created` comes from disk: a date so far back that the difference overflows is old.
        let (age, overflow) = now.subtractingReportingOverflow(created)
        return overflow ? created < now : age >= Ticks.nanoseconds(maximumAge)
    }

    /// Nanoseconds since 1970; a date beyond what they can hold (before 1678 or after 2262,
    /// such as `Date.distantFuture`) is the nearest they can.
    func nanoseconds(_ date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1e9).rounded()
        guard value < 9.2e18 else { return .max }
        guard value > -9.2e18 else { return .min }
        return Int64(value)
    }

    static func date(_ nanoseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(nanoseconds) / 1e9)
    }
}

/// A thread-safe counter for temporary file names.
private final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    func next() -> Int {
        self.value.wrappingAdd(1, ordering: .relaxed).oldValue
    }
}
