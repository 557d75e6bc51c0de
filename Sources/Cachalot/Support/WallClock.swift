import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The system's wall clock, read as finely as HTTP's times need and no finer.
///
/// HTTP dates and ages are whole seconds, so a loader's default clock is the kernel's coarse
/// clock on Linux: the time of its last tick, a few milliseconds behind at most, for a fraction
/// of the cost of a precise reading (measured at about 8 % of a memory hit's time).
public enum WallClock {
    /// The present, to within the kernel's tick on Linux; `Date()` elsewhere.
    public static func now() -> Date {
        #if os(Linux)
        var time = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &time)
        return Date(timeIntervalSince1970: TimeInterval(time.tv_sec) + TimeInterval(time.tv_nsec) / 1e9)
        #else
        return Date()
        #endif
    }
}

/// A wall clock read by a function, as a Swift `Clock`: for a ``MemoryCache`` whose entries
/// expire by the same clock as a loader's or a pipeline's `now`, a test's included.
public struct DateClock: Clock {
    /// A moment on the wall clock.
    public struct Instant: InstantProtocol {
        /// The moment.
        public let date: Date

        /// The moment `duration` later.
        public func advanced(by duration: Duration) -> Self {
            let (seconds, attoseconds) = duration.components
            return Self(date: self.date.addingTimeInterval(TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18))
        }

        /// The time from this moment to `other`, negative if `other` is earlier.
        public func duration(to other: Self) -> Duration { .seconds(other.date.timeIntervalSince(self.date)) }

        /// Whether `lhs` is earlier.
        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.date < rhs.date }
    }

    private let read: @Sendable () -> Date

    /// A clock that reads `read`.
    ///
    /// - Parameter read: The wall clock. Default: ``WallClock/now()``.
    public init(_ read: @escaping @Sendable () -> Date = WallClock.now) {
        self.read = read
    }

    /// The moment `read` gives.
    public var now: Instant { Instant(date: self.read()) }

    /// A microsecond: finer than a `Date` keeps for today's dates.
    public var minimumResolution: Duration { .microseconds(1) }

    /// Sleeps for as long as `read` says is left until `deadline`, once: a wall clock that moves
    /// faster or slower than real time is not followed.
    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        try await Task.sleep(for: max(.zero, self.now.duration(to: deadline)))
    }
}
