import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Cachalot

@Suite("ReaderCounters")
struct ReaderCountersTests {
    /// What the reader and the writer thread share in the waiting test.
    final class Race: @unchecked Sendable {  // only atomics and the counters' own atomics
        let counters = ReaderCounters(shardCount: 4)
        let writerStarted = Atomic(false)
        let readerLeft = Atomic(false)
        let writerSawReaderLeft = Atomic(false)
        let writerFinished = DispatchSemaphore(value: 0)
    }

    @Test("a writer waits until the reader inside the shard has left")
    func writerWaitsForReader() {
        let race = Race()
        let slot = race.counters.base(ofShard: 2)
        race.counters.enter(slot)
        Thread {
            race.writerStarted.store(true, ordering: .sequentiallyConsistent)
            race.counters.waitForReaders(ofShard: 2)
            let left = race.readerLeft.load(ordering: .sequentiallyConsistent)
            race.writerSawReaderLeft.store(left, ordering: .sequentiallyConsistent)
            race.writerFinished.signal()
        }.start()
        while !race.writerStarted.load(ordering: .sequentiallyConsistent) {}
        // Give a writer that did not wait every chance to finish first: spin, do not sleep.
        var spins = 0
        while spins < 5_000_000 { spins &+= race.counters.slotCount > 0 ? 1 : 2 }
        race.readerLeft.store(true, ordering: .sequentiallyConsistent)
        race.counters.exit(slot)
        race.writerFinished.wait()
        let sawReaderLeft = race.writerSawReaderLeft.load(ordering: .sequentiallyConsistent)
        #expect(sawReaderLeft)
    }

    @Test(
        "a writer does not wait for readers of other shards, nor for readers that left",
        .timeLimit(.minutes(1))  // a wrong wait would hang: the limit makes it a failure
    )
    func writerIgnoresOtherShards() {
        let counters = ReaderCounters(shardCount: 4)
        let other = counters.base(ofShard: 1)
        counters.enter(other)
        let left = counters.base(ofShard: 3)
        counters.enter(left)
        counters.exit(left)
        counters.waitForReaders(ofShard: 3)  // returns: nobody is inside shard 3
        counters.exit(other)
    }

    @Test("hits are the exits that were neither misses nor step-backs")
    func countsAreExact() {
        let counters = ReaderCounters(shardCount: 2)
        let slot = counters.base(ofShard: 1)
        for _ in 0..<7 {
            counters.enter(slot)
            counters.exit(slot)
        }
        for _ in 0..<3 {
            counters.enter(slot)
            counters.exit(slot, counting: ReaderCounters.misses)
        }
        counters.enter(slot)
        counters.exit(slot, counting: ReaderCounters.stepBacks)
        let counts = counters.counts(ofShard: 1)
        #expect(counts.hits == 7)
        #expect(counts.misses == 3)
        let untouched = counters.counts(ofShard: 0)
        #expect(untouched.hits == 0 && untouched.misses == 0)
    }
}
