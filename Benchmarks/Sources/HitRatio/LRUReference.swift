/// A least-recently-used cache of keys, the reference the memory tier's policy is compared to.
///
/// Entries are linked through index arrays, so a hit moves an entry to the front without
/// allocating.
struct LRUReference {
    private var positions: [Int: Int32] = [:]
    private var keys: [Int] = []
    private var older: [Int32] = []
    private var newer: [Int32] = []
    private var newest: Int32 = -1
    private var oldest: Int32 = -1
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        self.positions.reserveCapacity(capacity)
    }

    /// Looks `key` up, inserts it on a miss (evicting the least recently used key when full),
    /// and returns whether it was a hit.
    mutating func access(_ key: Int) -> Bool {
        if let position = self.positions[key] {
            self.unlink(position)
            self.pushNewest(position)
            return true
        }
        let position: Int32
        if self.keys.count < self.capacity {
            position = Int32(self.keys.count)
            self.keys.append(key)
            self.older.append(-1)
            self.newer.append(-1)
        } else {
            position = self.oldest
            self.unlink(position)
            self.positions[self.keys[Int(position)]] = nil
            self.keys[Int(position)] = key
        }
        self.positions[key] = position
        self.pushNewest(position)
        return false
    }

    private mutating func unlink(_ position: Int32) {
        let (before, after) = (self.older[Int(position)], self.newer[Int(position)])
        if before >= 0 { self.newer[Int(before)] = after } else { self.oldest = after }
        if after >= 0 { self.older[Int(after)] = before } else { self.newest = before }
    }

    private mutating func pushNewest(_ position: Int32) {
        self.older[Int(position)] = self.newest
        self.newer[Int(position)] = -1
        if self.newest >= 0 { self.newer[Int(self.newest)] = position } else { self.oldest = position }
        self.newest = position
    }
}
