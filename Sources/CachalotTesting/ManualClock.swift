import Synchronization

/// A clock whose time moves only when a test calls ``advance(by:)``, so tests never sleep.
///
/// Inject it wherever Cachalot takes a clock:
///
/// ```swift
/// let clock = ManualClock()
/// let cache = try MemoryCache<String, Int>(configuration: .init(timeToLive: .seconds(60)), clock: clock)
/// try cache.set(1, forKey: "a")
/// clock.advance(by: .seconds(60))
/// #expect(cache.value(forKey: "a") == nil)
/// ```
public final class ManualClock: Clock, Sendable {
    /// A point in a manual clock's time: how far it has been advanced since it was made.
    public struct Instant: InstantProtocol {
        /// The time since the clock was made.
        public var offset: Duration

        /// The instant `duration` after this one.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: self.offset + duration) }
        /// The time from this instant to `other`; negative if `other` is earlier.
        public func duration(to other: Instant) -> Duration { other.offset - self.offset }
        /// Whether `lhs` comes before `rhs`.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [(deadline: Instant, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Mutex(State())

    /// Creates a clock at offset zero.
    public init() {}

    /// The current instant; it changes only through ``advance(by:)``.
    public var now: Instant { self.state.withLock { $0.now } }
    /// One nanosecond.
    public var minimumResolution: Duration { .nanoseconds(1) }
    /// How many sleepers wait for ``advance(by:)`` now: a test waits until its code under test
    /// sleeps before it moves time, so that the move is not made before the sleep begins.
    public var sleeperCount: Int { self.state.withLock { $0.sleepers.count } }

    /// Moves time forward and wakes the sleepers whose deadline has come.
    public func advance(by duration: Duration) {
        let woken = self.state.withLock { state in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    /// Suspends until ``advance(by:)`` moves the clock to `deadline` or past it; returns at once
    /// if it is there already. `tolerance` is ignored.
    ///
    /// - Throws: Never: unlike `ContinuousClock`'s, this sleep does not end on cancellation (the
    ///   signature is `Clock`'s); a test that cancels a sleeper must also advance the clock.
    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
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
