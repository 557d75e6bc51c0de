import Synchronization

/// Writes to the disk tier, made one at a time in the order they were queued, whichever task
/// makes them.
///
/// A loader stores a response in memory at once and on disk once the run's callers have their
/// answer, from a task of lower priority. Two answers for one URL in a row (a miss, then a 304
/// that freshens it) would otherwise race to the disk, and the older one could land last: the
/// disk would keep, for the next launch, the response that memory had replaced.
///
/// The queue is held in memory: a caller that finds it too long waits until it is shorter
/// (``wait(untilBacklogIsAtMost:)``), and so does one whose write must be on disk before it
/// goes on (``wait(untilMade:)``).
final class OrderedWrites: Sendable {
    /// A queued write: its number in the order of queuing (from 1), and the bytes of the
    /// writes not yet made, this one included, when it was queued.
    struct Ticket {
        var number: Int
        var backlog: Int
    }

    private struct Write {
        var bytes: Int
        var make: @Sendable () -> Void
    }

    private struct Waiter {
        var backlog: Int
        var made: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var queue: [Write] = []
        var isDraining = false
        /// The bytes of the queued writes, and of the one being made.
        var backlog = 0
        /// How many writes were queued, and how many of them are made.
        var queued = 0
        var made = 0
        var waiters: [Waiter] = []

        func satisfies(backlog: Int, made: Int) -> Bool {
            self.backlog <= backlog || self.made >= made
        }
    }

    private let state = Mutex(State())
    private let pending: PendingWork

    /// Makes a queue whose writes count in `pending` from being queued until made.
    init(counting pending: PendingWork) {
        self.pending = pending
    }

    /// Queues `write` of `bytes`, to be made by the next ``drain()``.
    func enqueue(bytes: Int, _ write: @escaping @Sendable () -> Void) -> Ticket {
        self.pending.begin()
        return self.state.withLock { state in
            state.queue.append(Write(bytes: bytes, make: write))
            state.backlog += bytes
            state.queued += 1
            return Ticket(number: state.queued, backlog: state.backlog)
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
        // The bytes of the write made last: the write itself (and what its closure holds) is let
        // go before it counts as made.
        var made: Int?
        while true {
            let (next, ready) = self.state.withLock { state -> (Write?, [CheckedContinuation<Void, Never>]) in
                if let made {
                    state.backlog -= made
                    state.made += 1
                }
                var ready: [CheckedContinuation<Void, Never>] = []
                let now = state
                state.waiters.removeAll { waiter in
                    guard now.satisfies(backlog: waiter.backlog, made: waiter.made) else { return false }
                    ready.append(waiter.continuation)
                    return true
                }
                guard !state.queue.isEmpty else {
                    state.isDraining = false
                    return (nil, ready)
                }
                return (state.queue.removeFirst(), ready)
            }
            if made != nil { self.pending.end() }
            for waiter in ready { waiter.resume() }
            guard let next else { return }
            next.make()
            made = next.bytes
        }
    }

    /// Waits until the bytes of the writes not yet made are at most `bytes`. A drain must be
    /// on its way.
    func wait(untilBacklogIsAtMost bytes: Int) async {
        await self.wait(backlog: bytes, made: .max)
    }

    /// Waits until the write of `ticket` (and every write queued before it) is made. A drain
    /// must be on its way.
    func wait(untilMade ticket: Ticket) async {
        await self.wait(backlog: -1, made: ticket.number)
    }

    private func wait(backlog: Int, made: Int) async {
        await withCheckedContinuation { continuation in
            let isReady = self.state.withLock { state in
                guard !state.satisfies(backlog: backlog, made: made) else { return true }
                state.waiters.append(Waiter(backlog: backlog, made: made, continuation: continuation))
                return false
            }
            if isReady { continuation.resume() }
        }
    }

    /// How many tasks wait for the queue.
    var waiterCount: Int {
        self.state.withLock { $0.waiters.count }
    }
}
