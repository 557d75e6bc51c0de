/// One shard of a ``MemoryCache``: a hash index, the entries, and the S3-FIFO eviction queues.
///
/// A shard is a plain value that its owner keeps behind a `Mutex`; nothing in it locks.
///
/// **Storage.** Entries live densely in `entries`. A removal moves the last entry into the hole
/// (swap-remove), so the array never holds dead slots and a removed value is released at once.
/// `buckets` is an open-addressing table with linear probing over the entries' precomputed
/// hashes; it stores entry indices, so a key is hashed once per call, by the cache, and never
/// again. Deletion shifts later buckets back instead of leaving tombstones.
///
/// **Eviction (S3-FIFO, Yang et al., SOSP 2023).** New entries enter a small FIFO queue that
/// holds about 10 % of the shard; entries that were read while in it move to the main FIFO
/// queue when they reach its tail, the others are evicted and their hashes remembered in a
/// ghost queue. An entry whose hash is in the ghost queue goes straight to the main queue when
/// it comes back. The main queue gives each entry at its tail another round for every read
/// (up to three). A hit only increments a small counter: no list is touched on a read. One-time
/// keys (scans) leave through the small queue without disturbing the main one.
@usableFromInline
struct MemoryCacheShard<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline
    typealias Statistics = MemoryCacheStatistics

    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline var key: Key
        @usableFromInline var value: Value
        @usableFromInline let hash: Int
        @usableFromInline var cost: Int
        /// Ticks after which the entry is expired; `Int64.max` for never.
        @usableFromInline var expiry: Int64
        /// The neighbour nearer the tail (evicted sooner), or `none`.
        @usableFromInline var older: Int32 = none
        /// The neighbour nearer the head (evicted later), or `none`.
        @usableFromInline var newer: Int32 = none
        /// Reads since the entry last moved, capped at ``maximumFrequency``.
        @usableFromInline var frequency: UInt8 = 0
        @usableFromInline var isInMainQueue = false

        @usableFromInline
        init(key: Key, value: Value, hash: Int, cost: Int, expiry: Int64) {
            self.key = key
            self.value = value
            self.hash = hash
            self.cost = cost
            self.expiry = expiry
        }
    }

    /// A FIFO queue threaded through the entries by their `older` and `newer` links.
    @usableFromInline
    struct Queue: Sendable {
        @usableFromInline var head: Int32 = none
        @usableFromInline var tail: Int32 = none
        @usableFromInline var count = 0
        @usableFromInline var cost = 0

        @usableFromInline
        init() {}
    }

    /// Why an entry leaves the shard.
    @usableFromInline
    enum Reason: Sendable {
        case cost, count, expiry, pressure
    }

    @usableFromInline static var none: Int32 { -1 }
    @usableFromInline static var maximumFrequency: UInt8 { 3 }
    @usableFromInline static var never: Int64 { .max }

    // What a hit touches comes first, so that it shares a cache line with the lock word before
    // it: a hit then writes one line (the lock and the hit counter), not two.
    @usableFromInline var entries: ContiguousArray<Entry> = []
    @usableFromInline var buckets: ContiguousArray<Int32>
    @usableFromInline var statistics = Statistics()
    /// Entries with an expiry; while 0, no operation reads the clock.
    @usableFromInline var expiringCount = 0
    @usableFromInline var small = Queue()
    @usableFromInline var main = Queue()
    @usableFromInline var ghost = GhostQueue()
    @usableFromInline var totalCost = 0

    @usableFromInline let costLimit: Int
    @usableFromInline let countLimit: Int
    /// 128 bytes (two cache lines), so that a writer of one shard does not disturb readers of
    /// the next one in memory.
    private let padding: (SIMD64<UInt8>, SIMD64<UInt8>) = (.zero, .zero)

    init(costLimit: Int, countLimit: Int) {
        self.costLimit = costLimit
        self.countLimit = countLimit
        self.buckets = ContiguousArray(repeating: Self.none, count: 16)
    }

    @usableFromInline var count: Int { self.entries.count }

    // MARK: - Operations

    /// What a read without the lock found.
    @usableFromInline
    enum Peek {
        case hit(Value)
        case miss
        /// The read must change the shard: record a read, or remove an expired entry.
        case needsExclusiveAccess
    }

    /// Looks `key` up in the shard at `state` without changing anything. An entry whose read
    /// counter is already at its cap has nothing to record, so the hit needs no lock; the other
    /// hits, and expired entries, need exclusive access.
    ///
    /// It reads through the pointer, element by element: a method on the shard value would copy
    /// it, retaining its arrays, which is a write to memory that every reader shares.
    @inlinable
    static func peek(_ state: UnsafePointer<Self>, forKey key: Key, hash: Int, ticks: Ticks) -> Peek {
        let mask = state.pointee.buckets.count - 1
        var bucket = hash & mask
        while true {
            let index = Int(state.pointee.buckets[bucket])
            if index == Int(Self.none) { return .miss }
            if state.pointee.entries[index].hash == hash && state.pointee.entries[index].key == key {
                guard state.pointee.entries[index].frequency == Self.maximumFrequency else {
                    return .needsExclusiveAccess
                }
                let expiry = state.pointee.entries[index].expiry
                if expiry != Self.never, expiry <= ticks.read() { return .needsExclusiveAccess }
                return .hit(state.pointee.entries[index].value)
            }
            bucket = (bucket + 1) & mask
        }
    }

    /// Returns the live value for `key`, counting a hit or a miss; an expired entry is removed.
    @inlinable
    mutating func value(forKey key: Key, hash: Int, ticks: Ticks) -> Value? {
        guard let index = self.find(key, hash: hash) else {
            self.statistics.misses &+= 1
            return nil
        }
        let position = Int(index)
        let expiry = self.entries[position].expiry
        if expiry != Self.never, expiry <= ticks.read() {
            self.remove(at: index, reason: .expiry)
            self.statistics.misses &+= 1
            return nil
        }
        if self.entries[position].frequency < Self.maximumFrequency {
            self.entries[position].frequency &+= 1
        }
        self.statistics.hits &+= 1
        return self.entries[position].value
    }

    /// Stores `value` for `key`, replacing any entry, then evicts until the limits hold.
    /// The caller has checked that `cost` fits in this shard.
    @inlinable
    mutating func set(_ value: Value, forKey key: Key, hash: Int, cost: Int, expiry: Int64, ticks: Ticks) {
        if let index = self.find(key, hash: hash) {
            let position = Int(index)
            let delta = cost - self.entries[position].cost
            self.adjustExpiring(from: self.entries[position].expiry, to: expiry)
            self.entries[position].value = value
            self.entries[position].expiry = expiry
            self.entries[position].cost = cost
            self.totalCost += delta
            if self.entries[position].isInMainQueue {
                self.main.cost += delta
            } else {
                self.small.cost += delta
            }
        } else {
            let index = Int32(truncatingIfNeeded: self.entries.count)
            self.entries.append(Entry(key: key, value: value, hash: hash, cost: cost, expiry: expiry))
            self.insertBucket(for: index, hash: hash)
            self.adjustExpiring(from: Self.never, to: expiry)
            self.totalCost += cost
            self.pushHead(index, toMain: self.ghost.contains(hash))
        }
        self.statistics.insertions &+= 1
        self.evictToLimits(ticks: ticks)
    }

    /// Removes the entry for `key` and returns its value.
    @usableFromInline
    mutating func removeValue(forKey key: Key, hash: Int) -> Value? {
        guard let index = self.find(key, hash: hash) else { return nil }
        return self.remove(at: index, reason: nil).value
    }

    /// Removes every entry; statistics other than the current cost and count are kept.
    mutating func removeAll() {
        self.entries.removeAll()
        self.buckets = ContiguousArray(repeating: Self.none, count: 16)
        self.small = Queue()
        self.main = Queue()
        self.ghost = GhostQueue()
        self.totalCost = 0
        self.expiringCount = 0
    }

    /// Evicts in policy order until the total cost is at most `cost`.
    mutating func trim(toCost cost: Int, reason: Reason, ticks: Ticks) {
        while self.totalCost > cost, !self.entries.isEmpty {
            self.evictOne(reason: reason, ticks: ticks)
        }
    }

    /// Removes every entry that `isRemoved` accepts; returns how many.
    mutating func removeValues(where isRemoved: (Key, Value) -> Bool) -> Int {
        var removed = 0
        var index = self.entries.count - 1
        while index >= 0 {
            // Swap-remove only moves entries from above `index`, which were already checked.
            if isRemoved(self.entries[index].key, self.entries[index].value) {
                self.remove(at: Int32(truncatingIfNeeded: index), reason: nil)
                removed += 1
            }
            index -= 1
        }
        return removed
    }

    /// Removes every expired entry.
    mutating func removeExpired(ticks: Ticks) {
        guard self.expiringCount > 0 else { return }
        let now = ticks.read()
        var index = self.entries.count - 1
        while index >= 0 {
            // Swap-remove only moves entries from above `index`, which were already checked.
            if self.entries[index].expiry <= now {
                self.remove(at: Int32(truncatingIfNeeded: index), reason: .expiry)
            }
            index -= 1
        }
    }

    /// The statistics with the current cost and count filled in.
    @usableFromInline
    var snapshot: Statistics {
        var statistics = self.statistics
        statistics.totalCost = self.totalCost
        statistics.count = self.entries.count
        return statistics
    }

    // MARK: - Eviction

    @inlinable
    mutating func evictToLimits(ticks: Ticks) {
        while self.entries.count > self.countLimit || self.totalCost > self.costLimit {
            self.evictOne(reason: self.entries.count > self.countLimit ? .count : .cost, ticks: ticks)
        }
    }

    /// Evicts one entry, moving entries between and within the queues as S3-FIFO does.
    @usableFromInline
    mutating func evictOne(reason: Reason, ticks: Ticks) {
        var now: Int64?
        while true {
            let fromSmall =
                self.small.count > 0
                && (self.main.count == 0 || self.small.cost > self.costLimit / 10
                    || self.small.count > self.countLimit / 10)
            let index = fromSmall ? self.small.tail : self.main.tail
            let position = Int(index)
            let expiry = self.entries[position].expiry
            if expiry != Self.never {
                let reading = now ?? ticks.read()
                now = reading
                if expiry <= reading {
                    self.remove(at: index, reason: .expiry)
                    return
                }
            }
            let frequency = self.entries[position].frequency
            if frequency > 0 {
                // Read since it was queued: another round in the main queue, one read fewer.
                self.unlink(index)
                self.entries[position].frequency = fromSmall ? 0 : frequency - 1
                self.pushHead(index, toMain: true)
                continue
            }
            if fromSmall {
                self.ghost.append(self.entries[position].hash, capacity: max(self.main.count, 16))
            }
            self.remove(at: index, reason: reason)
            return
        }
    }

    // MARK: - Queues

    @usableFromInline
    mutating func pushHead(_ index: Int32, toMain: Bool) {
        let position = Int(index)
        var queue = toMain ? self.main : self.small
        self.entries[position].isInMainQueue = toMain
        self.entries[position].newer = Self.none
        self.entries[position].older = queue.head
        if queue.head != Self.none {
            self.entries[Int(queue.head)].newer = index
        } else {
            queue.tail = index
        }
        queue.head = index
        queue.count += 1
        queue.cost += self.entries[position].cost
        if toMain { self.main = queue } else { self.small = queue }
    }

    @usableFromInline
    mutating func unlink(_ index: Int32) {
        let position = Int(index)
        let (older, newer) = (self.entries[position].older, self.entries[position].newer)
        let isInMainQueue = self.entries[position].isInMainQueue
        var queue = isInMainQueue ? self.main : self.small
        if older != Self.none {
            self.entries[Int(older)].newer = newer
        } else {
            queue.tail = newer
        }
        if newer != Self.none {
            self.entries[Int(newer)].older = older
        } else {
            queue.head = older
        }
        queue.count -= 1
        queue.cost -= self.entries[position].cost
        if isInMainQueue { self.main = queue } else { self.small = queue }
    }

    // MARK: - Removal

    /// Removes the entry at `index` and returns it, counting an eviction when `reason` is set.
    @usableFromInline
    @discardableResult
    mutating func remove(at index: Int32, reason: Reason?) -> Entry {
        let position = Int(index)
        self.unlink(index)
        self.deleteBucket(self.bucket(of: index))
        self.totalCost -= self.entries[position].cost
        self.adjustExpiring(from: self.entries[position].expiry, to: Self.never)
        switch reason {
        case .cost?: self.statistics.evictions.cost &+= 1
        case .count?: self.statistics.evictions.count &+= 1
        case .expiry?: self.statistics.evictions.expiry &+= 1
        case .pressure?: self.statistics.evictions.pressure &+= 1
        case nil: break
        }
        let last = Int32(truncatingIfNeeded: self.entries.count - 1)
        guard index != last else { return self.entries.removeLast() }
        // Move the last entry into the hole, and point its bucket and neighbours at it.
        self.buckets[self.bucket(of: last)] = index
        let moved = self.entries.removeLast()
        let removed = self.entries[position]
        self.entries[position] = moved
        if moved.older != Self.none {
            self.entries[Int(moved.older)].newer = index
        } else if moved.isInMainQueue {
            self.main.tail = index
        } else {
            self.small.tail = index
        }
        if moved.newer != Self.none {
            self.entries[Int(moved.newer)].older = index
        } else if moved.isInMainQueue {
            self.main.head = index
        } else {
            self.small.head = index
        }
        return removed
    }

    @inlinable
    mutating func adjustExpiring(from old: Int64, to new: Int64) {
        if old != Self.never { self.expiringCount -= 1 }
        if new != Self.never { self.expiringCount += 1 }
    }

    // MARK: - Index

    /// The index of the entry for `key`, or `nil`.
    @inlinable
    func find(_ key: Key, hash: Int) -> Int32? {
        let mask = self.buckets.count - 1
        var bucket = hash & mask
        while true {
            let index = self.buckets[bucket]
            if index == Self.none { return nil }
            if self.entries[Int(index)].hash == hash && self.entries[Int(index)].key == key { return index }
            bucket = (bucket + 1) & mask
        }
    }

    /// The bucket that holds entry `index`.
    @usableFromInline
    func bucket(of index: Int32) -> Int {
        let mask = self.buckets.count - 1
        var bucket = self.entries[Int(index)].hash & mask
        while self.buckets[bucket] != index {
            bucket = (bucket + 1) & mask
        }
        return bucket
    }

    @usableFromInline
    mutating func insertBucket(for index: Int32, hash: Int) {
        if self.entries.count * 2 > self.buckets.count {
            self.rebuildBuckets(count: self.buckets.count * 2)
            return  // the rebuild placed every entry, this one included
        }
        let mask = self.buckets.count - 1
        var bucket = hash & mask
        while self.buckets[bucket] != Self.none {
            bucket = (bucket + 1) & mask
        }
        self.buckets[bucket] = index
    }

    @usableFromInline
    mutating func rebuildBuckets(count: Int) {
        self.buckets = ContiguousArray(repeating: Self.none, count: count)
        let mask = count - 1
        for index in self.entries.indices {
            var bucket = self.entries[index].hash & mask
            while self.buckets[bucket] != Self.none {
                bucket = (bucket + 1) & mask
            }
            self.buckets[bucket] = Int32(truncatingIfNeeded: index)
        }
    }

    /// Empties `bucket`, shifting back later buckets of the same probe run (no tombstones).
    @usableFromInline
    mutating func deleteBucket(_ bucket: Int) {
        let mask = self.buckets.count - 1
        var hole = bucket
        var next = bucket
        while true {
            next = (next + 1) & mask
            let index = self.buckets[next]
            if index == Self.none { break }
            let home = self.entries[Int(index)].hash & mask
            // The entry at `next` may fill the hole unless its home lies cyclically in (hole, next].
            let staysPut = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if !staysPut {
                self.buckets[hole] = index
                hole = next
            }
        }
        self.buckets[hole] = Self.none
    }
}
