import Synchronization

/// Writes to the disk tier, made one at a time in the order they were queued, whichever task
/// makes them.
///
/// A loader stores a response in memory at once and on disk once the run's callers have their
/// answer, from a task of lower priority. Two answers for one URL in a row (a miss, then a 304
/// that freshens it) would otherwise race to the disk, and the older one could land last: the
/// disk would keep, for the next launch, the response that memory had replaced.
final class OrderedWrites: Sendable {
    private let state = Mutex<(queue: [@Sendable () -> Void], isDraining: Bool)>(([], false))
    private let pending: PendingWork

    /// Makes a queue whose writes count in `pending` from being queued until made.
    init(counting pending: PendingWork) {
        self.pending = pending
    }

    /// Queues `write`, to be made by the next ``drain()``.
    func enqueue(_ write: @escaping @Sendable () -> Void) {
        self.pending.begin()
        self.state.withLock { $0.queue.append(write) }
    }

    /// Makes the queued writes in order until none is left; returns at once if another caller
    /// is making them already (it makes the ones queued since, too).
    func drain() {
        let claimed = self.state.withLock { state in
            defer { state.isDraining = true }
            return !state.isDraining
        }
        guard claimed else { return }
        while true {
            let next = self.state.withLock { state -> (@Sendable () -> Void)? in
                guard !state.queue.isEmpty else {
                    state.isDraining = false
                    return nil
                }
                return state.queue.removeFirst()
            }
            guard let next else { return }
            next()
            self.pending.end()
        }
    }
}
