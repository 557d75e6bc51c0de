/// Readings of an injected clock as nanoseconds since the moment the reader was made.
///
/// Caches store instants as plain `Int64`s so that an entry stays small and comparing two
/// instants costs one instruction, whatever clock the caller injected.
@usableFromInline
struct Ticks: Sendable {
    @usableFromInline
    let read: @Sendable () -> Int64

    init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let origin = clock.now
        self.read = { Ticks.nanoseconds(origin.duration(to: clock.now)) }
    }

    /// Nanoseconds in `duration`, saturating at the bounds of `Int64`.
    @usableFromInline
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflow2 { return seconds < 0 ? .min : .max }
        return sum
    }
}
