/// What the journal says the disk cache holds: each entry's key, size and dates, in order of
/// use, with the total size.
///
/// An entry's size is the space its file takes: the file's length rounded up to whole
/// allocation units of the file system (4 KiB on ext4 and tmpfs), so that a limit bounds what
/// the disk gives up even for tiny entries. The journal records file lengths; the index rounds.
///
/// Every process builds the same index by replaying the same journal. Entries are linked from
/// the least to the most recently used, so eviction takes from one end in constant time; the
/// links are indices into a dense array, as in the memory tier.
struct DiskIndex {
    struct Entry {
        var digest: KeyDigest
        var key: String
        var size: Int
        var created: Int64
        var accessed: Int64
        /// Toward the least recently used end, or -1.
        var older: Int32 = -1
        /// Toward the most recently used end, or -1.
        var newer: Int32 = -1
    }

    private(set) var entries: ContiguousArray<Entry> = []
    private var positions: [KeyDigest: Int32] = [:]
    private var leastRecent: Int32 = -1
    private var mostRecent: Int32 = -1
    private(set) var totalSize = 0
    /// How many entries have their file in each subdirectory of `entries/`, by its number.
    private var countsBySubdirectory = [Int](repeating: 0, count: 256)
    /// The digests of an intent not yet followed by a commit.
    private(set) var openIntent: [KeyDigest]?
    /// The file system's allocation unit in bytes: sizes are counted in whole units.
    let allocationUnit: Int

    /// An empty index that counts sizes in whole `allocationUnit`s (values below 1 count bytes).
    init(allocationUnit: Int) {
        self.allocationUnit = max(1, allocationUnit)
    }

    var count: Int { self.entries.count }

    func entry(for digest: KeyDigest) -> Entry? {
        self.positions[digest].map { self.entries[Int($0)] }
    }

    mutating func apply(_ record: JournalRecord) {
        switch record {
        case .set(let digest, let key, let length, let created, let accessed):
            // Records are read from disk, where anything can be written: a size that is
            // negative, or that the total cannot hold, is one no cache wrote. Such a record is
            // ignored; a file it names is then unknown, and the sweep removes it.
            let previous = self.positions[digest].map { self.entries[Int($0)].size } ?? 0
            guard let size = Self.space(of: length, unit: self.allocationUnit),
                !(self.totalSize - previous).addingReportingOverflow(size).overflow
            else { return }
            self.remove(digest)
            let position = Int32(self.entries.count)
            self.entries.append(Entry(digest: digest, key: key, size: size, created: created, accessed: accessed))
            self.positions[digest] = position
            self.totalSize += size
            self.countsBySubdirectory[Int(digest.subdirectory)] += 1
            self.linkAsMostRecent(position)
        case .remove(let digest):
            self.remove(digest)
        case .access(let digest, let accessed):
            guard let position = self.positions[digest] else { return }
            self.entries[Int(position)].accessed = max(self.entries[Int(position)].accessed, accessed)
            self.unlink(position)
            self.linkAsMostRecent(position)
        case .intent(let digests):
            self.openIntent = digests
        case .commit:
            self.openIntent = nil
        }
    }

    /// The entries to evict, least recently used first, until at most `size` bytes and `count`
    /// entries remain.
    func victims(toFitSize size: Int, count: Int) -> [KeyDigest] {
        var victims: [KeyDigest] = []
        var (remainingSize, remainingCount) = (self.totalSize, self.entries.count)
        var position = self.leastRecent
        while position >= 0, remainingSize > size || remainingCount > count {
            let entry = self.entries[Int(position)]
            victims.append(entry.digest)
            remainingSize -= entry.size
            remainingCount -= 1
            position = entry.newer
        }
        return victims
    }

    /// The space a file of `length` bytes takes in whole `unit`s, or `nil` for a negative
    /// length or one too large to round.
    static func space(of length: Int, unit: Int) -> Int? {
        guard length >= 0 else { return nil }
        let (units, overflow) = (length / unit).addingReportingOverflow(length % unit == 0 ? 0 : 1)
        guard !overflow else { return nil }
        let (space, tooLarge) = units.multipliedReportingOverflow(by: unit)
        return tooLarge ? nil : space
    }

    /// The digests of the entries for which `isMatch` holds.
    func digests(where isMatch: (Entry) -> Bool) -> [KeyDigest] {
        self.entries.filter(isMatch).map(\.digest)
    }

    /// How many entries have their file in subdirectory `subdirectory` of `entries/`.
    func count(inSubdirectory subdirectory: UInt8) -> Int {
        self.countsBySubdirectory[Int(subdirectory)]
    }

    /// The entries from least to most recently used.
    var entriesByUse: [Entry] {
        var result: [Entry] = []
        result.reserveCapacity(self.entries.count)
        var position = self.leastRecent
        while position >= 0 {
            result.append(self.entries[Int(position)])
            position = self.entries[Int(position)].newer
        }
        return result
    }

    /// Records that rebuild this index from nothing, in order of use.
    var compacted: [JournalRecord] {
        self.entriesByUse.map { entry in
            .set(entry.digest, key: entry.key, size: entry.size, created: entry.created, accessed: entry.accessed)
        }
    }

    private mutating func remove(_ digest: KeyDigest) {
        guard let position = self.positions.removeValue(forKey: digest) else { return }
        self.unlink(position)
        self.totalSize -= self.entries[Int(position)].size
        self.countsBySubdirectory[Int(digest.subdirectory)] -= 1
        let last = Int32(self.entries.count - 1)
        if position != last {
            // Move the last entry into the hole and repoint its neighbours at it.
            let moved = self.entries.removeLast()
            self.entries[Int(position)] = moved
            self.positions[moved.digest] = position
            if moved.older >= 0 { self.entries[Int(moved.older)].newer = position } else { self.leastRecent = position }
            if moved.newer >= 0 { self.entries[Int(moved.newer)].older = position } else { self.mostRecent = position }
        } else {
            self.entries.removeLast()
        }
    }

    private mutating func unlink(_ position: Int32) {
        let (older, newer) = (self.entries[Int(position)].older, self.entries[Int(position)].newer)
        if older >= 0 { self.entries[Int(older)].newer = newer } else { self.leastRecent = newer }
        if newer >= 0 { self.entries[Int(newer)].older = older } else { self.mostRecent = older }
    }

    private mutating func linkAsMostRecent(_ position: Int32) {
        self.entries[Int(position)].older = self.mostRecent
        self.entries[Int(position)].newer = -1
        if self.mostRecent >= 0 {
            self.entries[Int(self.mostRecent)].newer = position
        } else {
            self.leastRecent = position
        }
        self.mostRecent = position
    }
}
