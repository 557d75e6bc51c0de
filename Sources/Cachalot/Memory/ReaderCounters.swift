import Foundation
import Synchronization

/// Counters with which lock-free readers of a shard announce themselves to its writers and count
/// what they found, one set per thread slot, so that a read writes only its own slot's memory.
///
/// A lock is a write: if every read locked its shard, two threads reading random keys would
/// pass the shard's cache line back and forth on about half of their reads, and two threads
/// would read no faster than one. Instead a reader counts itself in as *entered*, checks that
/// no writer is active, reads, and counts itself out as *exited*. A writer raises its shard's
/// flag, then waits until, in every slot, *exited* (read first) equals *entered* (read second):
/// at the first read nobody was inside, and whoever entered later saw the flag.
///
/// Entering and the flag use sequentially consistent operations, so either the reader sees the
/// flag and steps back, or the writer sees the reader and waits for it (the store-load pattern
/// of Dekker's algorithm). The counters only grow, so a hit costs two atomic additions, as a
/// lock would; hits are the exits that were neither misses nor step-backs.
@usableFromInline
struct ReaderCounters: ~Copyable {
    @usableFromInline static var entered: Int { 0 }
    @usableFromInline static var exited: Int { 1 }
    @usableFromInline static var misses: Int { 2 }
    @usableFromInline static var stepBacks: Int { 3 }
    @usableFromInline static var fields: Int { 4 }

    @usableFromInline let slotCount: Int
    /// Counters from one slot to the next: the shards' counters, padded to whole 128-byte spans
    /// so that two slots never share a cache line (or an adjacent-line prefetch).
    @usableFromInline let slotStride: Int
    @usableFromInline let counters: UnsafeMutablePointer<Atomic<Int>>

    /// Makes counters for `shardCount` shards, with twice as many slots as the machine has
    /// processors, and at least 8 (a power of two, at most 64). Threads are numbered in turn, so
    /// two threads share a slot only when more threads than slots have read; sharing is correct,
    /// only slower. A writer reads every slot, so more slots make writes dearer.
    init(shardCount: Int) {
        let processors = ProcessInfo.processInfo.activeProcessorCount
        var slotCount = 8
        while slotCount < 2 * processors, slotCount < 64 { slotCount *= 2 }
        self.slotCount = slotCount
        let perSpan = 128 / MemoryLayout<Atomic<Int>>.stride
        self.slotStride = (shardCount * Self.fields + perSpan - 1) / perSpan * perSpan
        let total = slotCount * self.slotStride
        self.counters = UnsafeMutablePointer<Atomic<Int>>.allocate(capacity: total)
        for index in 0..<total {
            (self.counters + index).initialize(to: Atomic(0))
        }
    }

    deinit {
        self.counters.deinitialize(count: self.slotCount * self.slotStride)
        self.counters.deallocate()
    }

    /// The first counter of `shard` in the calling thread's slot.
    @inlinable
    func base(ofShard shard: Int) -> Int {
        (ThreadNumber.current & (self.slotCount - 1)) * self.slotStride + shard * Self.fields
    }

    @inlinable
    func enter(_ base: Int) {
        self.counters[base + Self.entered].wrappingAdd(1, ordering: .sequentiallyConsistent)
    }

    /// Counts the reader out, after counting a miss or a step-back if it was one.
    @inlinable
    func exit(_ base: Int, counting field: Int? = nil) {
        if let field {
            self.counters[base + field].wrappingAdd(1, ordering: .relaxed)
        }
        self.counters[base + Self.exited].wrappingAdd(1, ordering: .releasing)
    }

    /// Waits until no reader is inside `shard`. The caller has raised the shard's writer flag,
    /// so readers that come now step back instead of reading.
    @usableFromInline
    func waitForReaders(ofShard shard: Int) {
        for slot in 0..<self.slotCount {
            let base = slot * self.slotStride + shard * Self.fields
            var spins = 0
            while true {
                let exited = self.counters[base + Self.exited].load(ordering: .sequentiallyConsistent)
                let entered = self.counters[base + Self.entered].load(ordering: .sequentiallyConsistent)
                if exited == entered { break }
                spins += 1
                // A reader inside takes nanoseconds; one that was preempted may take a while.
                if spins > 100 { sched_yield() }
            }
        }
    }

    /// The hits and misses that lock-free readers of `shard` counted, over all slots.
    func counts(ofShard shard: Int) -> (hits: Int, misses: Int) {
        (0..<self.slotCount).reduce(into: (hits: 0, misses: 0)) { counts, slot in
            let base = slot * self.slotStride + shard * Self.fields
            let exited = self.counters[base + Self.exited].load(ordering: .acquiring)
            let misses = self.counters[base + Self.misses].load(ordering: .relaxed)
            let stepBacks = self.counters[base + Self.stepBacks].load(ordering: .relaxed)
            counts.hits &+= exited &- misses &- stepBacks
            counts.misses &+= misses
        }
    }
}
