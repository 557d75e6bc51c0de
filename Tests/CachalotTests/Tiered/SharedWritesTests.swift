import Testing

@testable import Cachalot

@Suite("SharedWrites", .timeLimit(.minutes(1)))
struct SharedWritesTests {
    @Test("a write is let go, with the body it holds, before it counts as made")
    func writeLetGoBeforeMade() async {
        let pending = PendingWork()
        let writes = SharedWrites(counting: pending, largestBacklog: 1 << 20)
        let outcome = ReleaseProbe.Outcome()
        // The write waits for the gate, which opens once `enqueue` has returned: until then the
        // caller holds the write's closure too, and a worker that made the write first would
        // see the caller's reference let go last.
        let (gate, opening) = AsyncStream<Void>.makeStream()
        Self.enqueueHolding(ReleaseProbe(counting: pending, noting: outcome), into: writes, after: gate)
        opening.finish()
        await pending.waitUntilIdle()
        #expect(outcome.wasPendingAtRelease == true)
    }

    /// Queues a write that waits for `gate` to finish and holds `probe`, and nothing else does.
    private static func enqueueHolding(_ probe: ReleaseProbe, into writes: SharedWrites, after gate: AsyncStream<Void>)
    {
        let isQueued = writes.enqueue(key: "key", bytes: 1) {
            for await _ in gate {}
            _ = probe
        }
        #expect(isQueued)
    }
}
