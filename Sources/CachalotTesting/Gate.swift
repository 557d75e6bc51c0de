import Synchronization

/// Holds tasks until it is opened; then lets every waiter, and every later one, through.
public final class Gate: Sendable {
    /// Creates a closed gate.
    public init() {}

    private let state = Mutex(State())

    private struct State {
        var isOpen = false
        var waiters = Waiters<Void>()
    }

    /// Returns once the gate is open (at once if it already is), or once the calling task is
    /// cancelled, whichever comes first: a test stuck here ends with its time limit.
    ///
    /// It does not throw: a caller that must tell the two apart checks `Task.isCancelled`.
    public func wait() async {
        let id = self.state.withLock { $0.waiters.makeID() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let isWaiting = self.state.withLock { state in
                    // Read under the lock: a cancellation handler that ran before this found
                    // nothing to resume, and set the flag before it ran.
                    guard !state.isOpen, !Task.isCancelled else { return false }
                    state.waiters.add(continuation, id: id)
                    return true
                }
                if !isWaiting { continuation.resume() }
            }
        } onCancel: {
            self.state.withLock { $0.waiters.remove(id) }?.resume()
        }
    }

    /// Returns once the gate is open, even if the calling task is cancelled before: for a fake
    /// that must hold whether cancelled or not, such as a transport whose load takes its time to
    /// stop. A test stuck here outlives its time limit.
    public func waitIgnoringCancellation() async {
        await withCheckedContinuation { continuation in
            let isWaiting = self.state.withLock { state in
                guard !state.isOpen else { return false }
                state.waiters.add(continuation, id: state.waiters.makeID())
                return true
            }
            if !isWaiting { continuation.resume() }
        }
    }

    /// The tasks waiting now.
    var waiterCount: Int { self.state.withLock { $0.waiters.count } }

    /// Whether ``open()`` has been called.
    var isOpen: Bool { self.state.withLock { $0.isOpen } }

    /// Opens the gate for good, resuming every waiter; later calls do nothing more.
    public func open() {
        let waiters = self.state.withLock { state in
            state.isOpen = true
            return state.waiters.removeAll { _ in true }
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Counts events and lets a task wait until there have been enough.
public final class Countdown: Sendable {
    /// Creates a countdown at zero events.
    public init() {}

    private let state = Mutex(State())

    private struct State {
        var count = 0
        /// Each waiter with the count it waits for.
        var waiters = Waiters<Int>()
    }

    /// The events so far.
    public var count: Int { self.state.withLock { $0.count } }

    /// The tasks waiting now.
    var waiterCount: Int { self.state.withLock { $0.waiters.count } }

    /// Counts one event, and resumes the waiters whose count has now been reached.
    public func increment() {
        let ready = self.state.withLock { state in
            state.count += 1
            let count = state.count
            return state.waiters.removeAll { $0 <= count }
        }
        for waiter in ready { waiter.resume() }
    }

    /// Returns once `count` events have happened (at once if they already have), or once the
    /// calling task is cancelled, whichever comes first.
    ///
    /// It does not throw: a caller that must tell the two apart checks `Task.isCancelled` or
    /// ``count``.
    public func wait(for count: Int) async {
        let id = self.state.withLock { $0.waiters.makeID() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let isWaiting = self.state.withLock { state in
                    // Read under the lock, as in ``Gate/wait()``.
                    guard state.count < count, !Task.isCancelled else { return false }
                    state.waiters.add(continuation, id: id, value: count)
                    return true
                }
                if !isWaiting { continuation.resume() }
            }
        } onCancel: {
            self.state.withLock { $0.waiters.remove(id) }?.resume()
        }
    }
}

/// The tasks waiting on a ``Gate`` or a ``Countdown``, each under an id of its own, by which its
/// cancellation handler takes it out, with what it waits for.
private struct Waiters<Value> {
    private var nextID = 0
    private var entries: [Int: (value: Value, continuation: CheckedContinuation<Void, Never>)] = [:]

    /// An id for a waiter about to wait: made before its cancellation handler is set up, so that
    /// the handler has it even if it runs before the waiter is added.
    mutating func makeID() -> Int {
        defer { self.nextID += 1 }
        return self.nextID
    }

    /// The waiters.
    var count: Int { self.entries.count }

    mutating func add(_ continuation: CheckedContinuation<Void, Never>, id: Int, value: Value) {
        self.entries[id] = (value, continuation)
    }

    /// Takes out the waiter `id`, if it is still waiting, to be resumed.
    mutating func remove(_ id: Int) -> CheckedContinuation<Void, Never>? {
        self.entries.removeValue(forKey: id)?.continuation
    }

    /// Takes out the waiters whose value meets `isReady`, to be resumed.
    mutating func removeAll(where isReady: (Value) -> Bool) -> [CheckedContinuation<Void, Never>] {
        // In the order they came, as before ids: the lowest id first.
        let ready = self.entries.filter { isReady($0.value.value) }.sorted { $0.key < $1.key }
        for (id, _) in ready { self.entries.removeValue(forKey: id) }
        return ready.map(\.value.continuation)
    }
}

extension Waiters where Value == Void {
    mutating func add(_ continuation: CheckedContinuation<Void, Never>, id: Int) {
        self.add(continuation, id: id, value: ())
    }
}
