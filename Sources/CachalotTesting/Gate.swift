import Synchronization

/// Holds tasks until it is opened; then lets every waiter, and every later one, through.
public final class Gate: Sendable {
    public init() {}

    private let state = Mutex<(isOpen: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    public func wait() async {
        await withCheckedContinuation { continuation in
            let isOpen = self.state.withLock { state in
                if !state.isOpen { state.waiters.append(continuation) }
                return state.isOpen
            }
            if isOpen { continuation.resume() }
        }
    }

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
    public init() {}

    private let state = Mutex<(count: Int, waiters: [(Int, CheckedContinuation<Void, Never>)])>((0, []))

    /// The events so far.
    public var count: Int { self.state.withLock { $0.count } }

    public func increment() {
        let ready = self.state.withLock { state in
            state.count += 1
            let ready = state.waiters.filter { $0.0 <= state.count }
            state.waiters.removeAll { $0.0 <= state.count }
            return ready
        }
        for (_, waiter) in ready { waiter.resume() }
    }

    /// Returns once `count` events have happened.
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
