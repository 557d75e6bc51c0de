import Synchronization

extension MemoryCache {
    /// A shard's writer lock and writer flag, padded so that two shards' never share a cache line.
    @usableFromInline
    struct ShardLock: ~Copyable {
        /// Held by whoever changes the state: writers, and readers that must record something.
        @usableFromInline let lock = Mutex(())
        /// Raised, under the lock, while the state may change; readers that see it step back.
        @usableFromInline let isWriting = Atomic(false)
        /// 128 bytes (two cache lines, for adjacent-line prefetching).
        private let padding: (SIMD64<UInt8>, SIMD64<UInt8>) = (.zero, .zero)

        init() {}
    }

    /// Looks `key` up without the shard's lock. Returns the answer, a value or `.some(nil)` for a
    /// miss, or `nil` when a writer is active or the hit must be recorded under the lock.
    ///
    /// The read counts itself in and out in the calling thread's slot of ``ReaderCounters``, so
    /// that a writer waits for it; it writes nothing else.
    @inlinable
    func valueWithoutLock(forKey key: Key, hash: Int, shard: Int) -> Value?? {
        let slot = self.readers.base(ofShard: shard)
        self.readers.enter(slot)
        guard !self.locks[shard].isWriting.load(ordering: .sequentiallyConsistent) else {
            self.readers.exit(slot, counting: ReaderCounters.stepBacks)
            return nil
        }
        switch MemoryCacheShard.peek(self.states + shard, forKey: key, hash: hash, ticks: self.ticks) {
        case .hit(let value):
            self.readers.exit(slot)
            self.metrics?.recordHit()
            return .some(value)
        case .miss:
            self.readers.exit(slot, counting: ReaderCounters.misses)
            self.metrics?.recordMiss()
            return .some(nil)
        case .needsExclusiveAccess:
            self.readers.exit(slot, counting: ReaderCounters.stepBacks)
            return nil
        }
    }

    /// Runs `body` with the shard's lock held and no reader inside, and reports what it changed
    /// to metrics.
    @inlinable
    func withExclusiveAccess<Result: Sendable>(
        toShard index: Int,
        _ body: (inout MemoryCacheShard<Key, Value>) -> Result
    ) -> Result {
        let state = self.states + index
        let (result, change) = self.locks[index].lock.withLock { _ -> (Result, MemoryCacheStatistics?) in
            self.locks[index].isWriting.store(true, ordering: .sequentiallyConsistent)
            self.readers.waitForReaders(ofShard: index)
            defer { self.locks[index].isWriting.store(false, ordering: .releasing) }
            guard self.metrics != nil else { return (body(&state.pointee), nil) }
            let before = state.pointee.snapshot
            let result = body(&state.pointee)
            return (result, state.pointee.snapshot.change(since: before))
        }
        if let change { self.metrics?.record(change) }
        return result
    }
}
