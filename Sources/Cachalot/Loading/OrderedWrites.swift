import Synchronization

/// Writes to the disk tier, made one at a time in the order they were queued, whichever task
/// makes them.
///
/// A loader stores a response in memory at once and on disk once the run's callers have their
/// answer, from a task of lower priority. Two answers for one URL in a row (a miss, then a 304
/// that freshens it) would otherwise race to the disk, and the older one could land last: the
/// disk would keep, for the next launch, the response that memory had replaced.
final class OrderedWrites: Sendable {
    private struct Write {
        var bytes: Int
        var make: @Sendable () -> Void
    }

    private struct State {
        var queue: [Write] = []
        var isDraining = false
        /// The bytes of the queued writes, and of the one being made.
        var backlog = 0
        /// Tasks waiting for the backlog to shrink to their bound.
        var waiters: [(bound: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())
    private let pending: PendingWork

    /// Makes a queue whose writes count in `pending` from being queued until made.
    init(counting pending: PendingWork) {
        self.pending = pending
    }

    /// Queues `write` of `bytes`, to be made by the next ``drain()``; returns the bytes of
    /// the writes not yet made, this one included.
    func enqueue(bytes: Int, _ write: @escaping @Sendable () -> Void) -> Int {
        self.pending.begin()
        return self.state.withLock { state in
            state.queue.append(Write(bytes: bytes, make: write))
            state.backlog += bytes
            return state.backlog
        }
    }

    /// Makes the queued writes in order until none is left; returns at once if another caller
    /// is making them already (it makes the ones queued since, too).
    func drain() {
        let claimed = self.state.withLock { state in
            defer { state.isDraining = true }
            return !state.isDraining
        }
        guard claimed else { return }
        var made = 0
        while true {
            let (next, ready) = self.state.withLock { state -> (Write?, [CheckedContinuation<Void, Never>]) in
                state.backlog -= made
                var ready: [CheckedContinuation<Void, Never>] = []
                state.waiters.removeAll { waiter in
                    guard waiter.bound >= state.backlog else { return false }
                    ready.append(waiter.continuation)
                    return true
                }
                guard !state.queue.isEmpty else {
                    state.isDraining = false
                    return (nil, ready)
                }
                return (state.queue.removeFirst(), ready)
            }
            for waiter in ready { waiter.resume() }
            guard let next else { return }
            next.make()
            made = next.bytes
            self.pending.end()
        }
    }

    /// How many tasks wait in ``waitUntilBacklog(atMost:)``.
    var waiterCount: Int {
        self.state.withLock { $0.waiters.count }
    }

    /// Waits until the bytes of the writes not yet made are at most `bound`. A drain must be on
    /// its way: the caller starts one.
    func waitUntilBacklog(atMost bound: Int) async {
        await withCheckedContinuation { continuation in
            let isReady = self.state.withLock { state in
                guard state.backlog > bound else { return true }
                state.waiters.append((bound, continuation))
                return false
            }
            if isReady { continuation.resume() }
        }
    }
}
