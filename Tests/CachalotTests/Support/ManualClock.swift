import Synchronization

/// A clock whose time moves only when a test calls ``advance(by:)``, so tests never sleep.
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: self.offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - self.offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [(deadline: Instant, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    var now: Instant { self.state.withLock { $0.now } }
    var minimumResolution: Duration { .nanoseconds(1) }

    /// Moves time forward and wakes the sleepers whose deadline has come.
    func advance(by duration: Duration) {
        let woken = self.state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        await withCheckedContinuation { continuation in
            let isDue = self.state.withLock { state in
                if deadline <= state.now { return true }
                state.sleepers.append((deadline, continuation))
                return false
            }
            if isDue { continuation.resume() }
        }
    }
}
