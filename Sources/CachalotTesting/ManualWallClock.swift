import Foundation
import Synchronization

/// A wall clock that moves only when told, for code that takes `now: () -> Date`, such as
/// `DiskCache` and `ResourceLoader`.
///
/// ```swift
/// let clock = ManualWallClock()
/// let loader = try ResourceLoader(transport: transport, now: { clock.now })
/// clock.advance(by: 61)  // the response cached for 60 s is stale now
/// ```
public final class ManualWallClock: Sendable {
    private let current: Mutex<Date>

    /// A clock that reads `start` until advanced.
    ///
    /// - Parameter start: The time it reads first. Default: 2027-01-15 08:00:00 UTC.
    public init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        self.current = Mutex(start)
    }

    /// The time the clock reads.
    public var now: Date {
        self.current.withLock { $0 }
    }

    /// Moves the clock forward by `seconds`.
    public func advance(by seconds: TimeInterval) {
        self.current.withLock { $0 += seconds }
    }
}
