import Foundation
import HTTPTypes
import Logging

/// What the loader stores and removes, through its tiers: memory at once, the disk in order
/// after the answer, the shared tiers from tasks of their own.
extension ResourceLoader {
    /// Stores `response` in memory now, and in the other tiers later (see
    /// ``write(_:key:run:)``).
    func save(
        _ response: CachedResponse,
        key: ResponseKey,
        request: HTTPRequest,
        run: Run?
    ) async {
        await self.write(self.store.store(response, url: key, request: request), key: key, run: run)
    }

    /// Makes `later`, the writes that follow memory's: on disk once the run's callers have
    /// their answer (or, without a run, from a task of lower priority), so that a miss does not
    /// wait for the disk, unless the disk is ``largestWriteBacklog`` behind (then the caller
    /// makes the writes, or waits, so that the queue, held in memory, stays bounded) or there is
    /// no memory tier (then the response is on disk before the caller goes on, so that the next
    /// load finds it); in the shared tiers from a task of their own, never waited for. Disk
    /// writes are made in the order of this call.
    func write(_ later: ResponseStore.Writes, key: ResponseKey, run: Run?) async {
        let ticket = self.writes.enqueue(bytes: later.bytes) { [logger, counters] in
            do {
                try later.disk()
            } catch {
                counters.storageFailure()
                logger.debug("Storing a response failed", metadata: ["key": "\(key.string)", "error": "\(error)"])
            }
        }
        if let shared = later.shared {
            let isStarted = self.sharedWrites.enqueue(key: key.string, bytes: later.bytes) {
                [logger, counters] () async in
                do throws(CacheError) { try await shared() } catch {
                    counters.sharedStorageFailure()
                    logger.debug(
                        "Storing a response in a shared tier failed",
                        metadata: ["key": "\(key.string)", "error": "\(error)"]
                    )
                }
            }
            if !isStarted { self.counters.sharedStorageFailure() }
        }
        if self.store.memory == nil {
            self.writes.drain()
            await self.writes.wait(untilMade: ticket)
        } else if ticket.backlog > Self.largestWriteBacklog {
            self.writes.drain()
            await self.writes.wait(untilBacklogIsAtMost: Self.largestWriteBacklog)
        } else if let run {
            run.afterAnswering.add { [writes] in writes.drain() }
        } else {
            Task(priority: .background) { [writes] in writes.drain() }
        }
    }

    /// The bytes of bodies waiting for the disk beyond which a miss waits for the disk.
    static let largestWriteBacklog = 64 << 20

    /// Makes a large body written as it arrived into the stored entry.
    func commit(_ writer: any DataCacheWriting, variants names: [String], url: ResponseKey) {
        do {
            try writer.commit()
            if !names.isEmpty { try self.store.storeVariants(names, url: url) }
        } catch {
            self.counters.storageFailure()
            self.logger.debug(
                "Storing a large response failed",
                metadata: ["key": "\(url.string)", "error": "\(error)"]
            )
        }
    }

    /// Removes what is stored under `key` from every tier, after the writes to them queued
    /// before (so that none of them brings it back later), and returns once it is gone: the
    /// next load here cannot find what the invalidation made outdated. The shared tiers go
    /// first, so that a load meanwhile cannot bring back from them what memory and disk no
    /// longer hold.
    func invalidate(_ key: ResponseKey) async {
        let logger = self.logger
        @Sendable func failed(_ error: CacheError) {
            logger.debug("Invalidating failed", metadata: ["key": "\(key.string)", "error": "\(error)"])
        }
        await self.removals.run { () async in
            if !self.store.shared.isEmpty {
                await self.sharedWrites.waitForWrites(to: key.string)
                do throws(CacheError) { try await self.store.removeShared(key) } catch { failed(error) }
            }
            self.store.removeFromMemory(key)
            let ticket = self.writes.enqueue(bytes: 0) { [store] in
                do throws(CacheError) { try store.removeFromDisk(key) } catch { failed(error) }
            }
            self.writes.drain()
            await self.writes.wait(untilMade: ticket)
        }
    }
}
