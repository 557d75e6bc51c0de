import Synchronization

/// Writes to the shared tiers, made in the background so that no answer waits for them, by at
/// most ``concurrency`` tasks at once, so that they leave the shared tiers' connections to
/// reads. Their bodies are held in memory until they are made: past a backlog of
/// `largestBacklog` bytes, a write is dropped rather than queued, since a cache may always
/// forget. An invalidation waits for the writes to its URL queued before it
/// (``waitForWrites(to:)``), so that none lands after it.
final class SharedWrites: Sendable {
    /// The most writes made at once.
    static let concurrency = 4

    private struct Write {
        var number: Int
        var key: String
        var bytes: Int
        var make: @Sendable () async -> Void
    }

    private struct Waiter {
        /// The key whose writes it waits for, or `nil` for every key.
        var key: String?
        /// The last write queued when it began to wait.
        var number: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        /// The writes queued, from `head` on; those before it were taken, and are let go.
        var queue: [Write?] = []
        var head = 0
        var backlog = 0
        var running = 0
        var queued = 0
        /// The numbers of the writes queued or being made, by key.
        var unmade: [String: Set<Int>] = [:]
        var waiters: [Waiter] = []

        /// The first write queued, taken off the queue.
        mutating func popFirst() -> Write? {
            guard self.head < self.queue.count else { return nil }
            let first = self.queue[self.head]
            self.queue[self.head] = nil
            defer {
                self.head += 1
                // Taken writes are dropped once they are most of the array.
                if self.head >= 64 && self.head * 2 >= self.queue.count {
                    self.queue.removeFirst(self.head)
                    self.head = 0
                }
            }
            return first
        }

        func isSatisfied(key: String?, number: Int) -> Bool {
            if let key { return self.unmade[key].map { $0.allSatisfy { $0 > number } } ?? true }
            return self.unmade.values.allSatisfy { $0.allSatisfy { $0 > number } }
        }
    }

    private let state = Mutex(State())
    private let pending: PendingWork
    private let largestBacklog: Int

    /// Makes a queue whose writes count in `pending` from being queued until made.
    init(counting pending: PendingWork, largestBacklog: Int) {
        self.pending = pending
        self.largestBacklog = largestBacklog
    }

    /// Queues `write` of `key`'s responses, which holds `bytes`, unless the writes not yet made
    /// hold too much already; returns whether it queued it.
    @discardableResult
    func enqueue(key: String, bytes: Int, _ write: @escaping @Sendable () async -> Void) -> Bool {
        let (isQueued, startsWorker) = self.state.withLock { state -> (Bool, Bool) in
            // One write is always queued, however large, so that a lone large body is shared.
            guard state.backlog == 0 || state.backlog + bytes <= self.largestBacklog else { return (false, false) }
            state.backlog += bytes
            state.queued += 1
            state.queue.append(Write(number: state.queued, key: key, bytes: bytes, make: write))
            state.unmade[key, default: []].insert(state.queued)
            guard state.running < Self.concurrency else { return (true, false) }
            state.running += 1
            return (true, true)
        }
        guard isQueued else { return false }
        self.pending.begin()
        if startsWorker {
            self.pending.begin()
            Task(priority: .background) { await self.work() }
        }
        return true
    }

    /// Makes queued writes until none is left.
    private func work() async {
        // What is left of the write made last: the write itself (and the body its closure
        // holds) is let go before it counts as made.
        var made: (number: Int, key: String, bytes: Int)?
        while true {
            let (next, ready) = self.state.withLock { state -> (Write?, [CheckedContinuation<Void, Never>]) in
                if let made {
                    state.backlog -= made.bytes
                    state.unmade[made.key]?.remove(made.number)
                    if state.unmade[made.key]?.isEmpty == true { state.unmade[made.key] = nil }
                }
                var ready: [CheckedContinuation<Void, Never>] = []
                let now = state
                state.waiters.removeAll { waiter in
                    guard now.isSatisfied(key: waiter.key, number: waiter.number) else { return false }
                    ready.append(waiter.continuation)
                    return true
                }
                guard let next = state.popFirst() else {
                    state.running -= 1
                    return (nil, ready)
                }
                return (next, ready)
            }
            if made != nil { self.pending.end() }
            for waiter in ready { waiter.resume() }
            guard let next else {
                self.pending.end()
                return
            }
            await next.make()
            made = (next.number, next.key, next.bytes)
        }
    }

    /// Waits until the writes of `key` (of every key, if `nil`) queued before this call are made.
    func waitForWrites(to key: String?) async {
        await withCheckedContinuation { continuation in
            let isReady = self.state.withLock { state in
                guard !state.isSatisfied(key: key, number: state.queued) else { return true }
                state.waiters.append(Waiter(key: key, number: state.queued, continuation: continuation))
                return false
            }
            if isReady { continuation.resume() }
        }
    }

    /// How many tasks wait for writes to be made.
    var waiterCount: Int {
        self.state.withLock { $0.waiters.count }
    }
}
