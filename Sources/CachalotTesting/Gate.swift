import Synchronization

/// Holds tasks until it is opened; then lets every waiter, and every later one, through.
public final class Gate: Sendable {
    /// Creates a closed gate.
    public init() {}

    private let state = Mutex<(isOpen: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// Returns once the gate is open: at once if it already is. It does not respond to
    /// cancellation: a waiter stays until ``open()``.
    public func wait() async {
        await withCheckedContinuation { continuation in
            let isOpen = self.state.withLock { state in
                if !state.isOpen { state.waiters.append(continuation) }
                return state.isOpen
            }
            if isOpen { continuation.resume() }
        }
    }

    /// Opens the gate for good, resuming every waiter; later calls do nothing more.
    public func open() {
        let waiters = self.state.withLock { state in
            state.isOpen = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Counts events and lets a task wait until there have been enough.
public final class Countdown: Sendable {
    /// Creates a countdown at zero events.
    public init() {}

    private let state = Mutex<(count: Int, waiters: [(Int, CheckedContinuation<Void, Never>)])>((0, []))

    /// The events so far.
    public var count: Int { self.state.withLock { $0.count } }

    /// Counts one event, and resumes the waiters whose count has now been reached.
    public func increment() {
        let ready = self.state.withLock { state in
            state.count += 1
            let ready = state.waiters.filter { $0.0 <= state.count }
            state.waiters.removeAll { $0.0 <= state.count }
            return ready
        }
        for (_, waiter) in ready { waiter.resume() }
    }

    /// Returns once `count` events have happened: at once if they already have. It does not
    /// respond to cancellation.
    public func wait(for count: Int) async {
        await withCheckedContinuation { continuation in
            let isReady = self.state.withLock { state in
                if state.count < count { state.waiters.append((count, continuation)) }
                return state.count >= count
            }
            if isReady { continuation.resume() }
        }
    }
}
