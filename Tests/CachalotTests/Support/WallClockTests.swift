import Foundation
import Testing

@testable import Cachalot

@Suite("WallClock")
struct WallClockTests {
    @Test("the default clock reads the present to within the kernel's tick, never ahead of it")
    func coarseReading() {
        for _ in 0..<1_000 {
            let before = Date()
            let coarse = WallClock.now()
            let after = Date()
            // The coarse clock is the time of the last tick: at most a few milliseconds behind
            // a precise reading, and not ahead of one taken after it (1 µs for rounding).
            #expect(coarse.timeIntervalSince(after) <= 0.000_001)
            #expect(before.timeIntervalSince(coarse) < 0.05)
        }
    }
}
