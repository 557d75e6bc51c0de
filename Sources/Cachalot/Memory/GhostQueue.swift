/// The hashes of entries recently evicted from S3-FIFO's small queue, oldest first.
///
/// An entry whose hash is here when it is set again has proved it comes back, so it skips the
/// small queue. Only hashes are kept: a collision merely sends a new key to the main queue.
@usableFromInline
struct GhostQueue: Sendable {
    /// A ring buffer of hashes; `start` is the oldest, and `count` are in use.
    private var ring: ContiguousArray<Int> = []
    private var start = 0
    private var count = 0
    /// How many times each hash stands in the ring.
    private var occurrences: [Int: Int32] = [:]

    @usableFromInline
    init() {}

    @usableFromInline
    func contains(_ hash: Int) -> Bool {
        self.occurrences[hash] != nil
    }

    /// Appends `hash`, dropping the oldest hashes so that at most `capacity` remain.
    mutating func append(_ hash: Int, capacity: Int) {
        while self.count >= capacity {
            self.dropOldest()
        }
        if self.count == self.ring.count {
            self.grow(to: max(16, self.ring.count * 2))
        }
        self.ring[(self.start + self.count) % self.ring.count] = hash
        self.count += 1
        self.occurrences[hash, default: 0] += 1
    }

    private mutating func dropOldest() {
        let hash = self.ring[self.start]
        self.start = (self.start + 1) % self.ring.count
        self.count -= 1
        if let occurrences = self.occurrences[hash], occurrences > 1 {
            self.occurrences[hash] = occurrences - 1
        } else {
            self.occurrences[hash] = nil
        }
    }

    private mutating func grow(to capacity: Int) {
        var ring = ContiguousArray(repeating: 0, count: capacity)
        for offset in 0..<self.count {
            ring[offset] = self.ring[(self.start + offset) % self.ring.count]
        }
        self.ring = ring
        self.start = 0
    }
}
