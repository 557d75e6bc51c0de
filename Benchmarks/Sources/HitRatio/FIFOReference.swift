/// A first-in-first-out cache of keys, as the shared tier on PostgreSQL evicts: when full, the
/// key inserted longest ago goes, however often it was hit; a hit changes nothing.
///
/// The keys sit in a ring in the order they were inserted, so neither a hit nor an eviction
/// allocates.
struct FIFOReference {
    private var present: Set<Int> = []
    private var ring: [Int] = []
    /// The ring's slot of the oldest key once the ring is full.
    private var oldest = 0
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        self.present.reserveCapacity(capacity)
        self.ring.reserveCapacity(capacity)
    }

    /// Looks `key` up, inserts it on a miss (evicting the oldest key when full), and returns
    /// whether it was a hit.
    mutating func access(_ key: Int) -> Bool {
        if self.present.contains(key) { return true }
        if self.ring.count < self.capacity {
            self.ring.append(key)
        } else {
            self.present.remove(self.ring[self.oldest])
            self.ring[self.oldest] = key
            self.oldest = (self.oldest + 1) % self.capacity
        }
        self.present.insert(key)
        return false
    }
}
