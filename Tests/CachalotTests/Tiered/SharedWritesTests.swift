import Testing

@testable import Cachalot

@Suite("SharedWrites", .timeLimit(.minutes(1)))
struct SharedWritesTests {
    @Test("a write is let go, with the body it holds, before it counts as made")
    func writeLetGoBeforeMade() async {
        let pending = PendingWork()
        let writes = SharedWrites(counting: pending, largestBacklog: 1 << 20)
        let outcome = ReleaseProbe.Outcome()
        Self.enqueueHolding(ReleaseProbe(counting: pending, noting: outcome), into: writes)
        await pending.waitUntilIdle()
        #expect(outcome.wasPendingAtRelease == true)
    }

    /// Queues a write that holds `probe`, and nothing else does.
    private static func enqueueHolding(_ probe: ReleaseProbe, into writes: SharedWrites) {
        #expect(writes.enqueue(key: "key", bytes: 1) { _ = probe })
    }
}
