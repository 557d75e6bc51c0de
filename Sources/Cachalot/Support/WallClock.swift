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
