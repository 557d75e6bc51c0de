import Synchronization

/// Writes to the shared tiers, each made by a task of its own, so that no answer waits for
/// them. Their bodies are held in memory until they are made: past a backlog of
/// `largestBacklog` bytes, a write is dropped (and counted) rather than queued, since a cache
/// may always forget.
final class SharedWrites: Sendable {
    private let backlog = Mutex(0)
    private let dropped = Atomic(0)
    private let pending: PendingWork
    private let largestBacklog: Int

    /// Makes a queue whose writes count in `pending` from being queued until made.
    init(counting pending: PendingWork, largestBacklog: Int) {
        self.pending = pending
        self.largestBacklog = largestBacklog
    }

    /// Starts `write`, which holds `bytes`, unless the writes in flight hold too much already.
    func enqueue(bytes: Int, _ write: @escaping @Sendable () async -> Void) {
        let isAccepted = self.backlog.withLock { backlog in
            // One write is always accepted, however large, so that a lone large body is shared.
            guard backlog == 0 || backlog + bytes <= self.largestBacklog else { return false }
            backlog += bytes
            return true
        }
        guard isAccepted else {
            self.dropped.wrappingAdd(1, ordering: .relaxed)
            return
        }
        self.pending.begin()
        Task(priority: .background) {
            await write()
            self.backlog.withLock { $0 -= bytes }
            self.pending.end()
        }
    }

    /// How many writes were dropped because the backlog was full.
    var droppedCount: Int {
        self.dropped.load(ordering: .relaxed)
    }
}
