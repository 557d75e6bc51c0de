import Synchronization
import Testing

@testable import CachalotTesting

@Suite("Gate and Countdown")
struct GateTests {
    /// Waits until `count` tasks are held by `waiters` (a spin of yields, not a sleep).
    static func waitUntil(_ count: Int, areHeldBy waiters: () -> Int) async {
        while waiters() < count, !Task.isCancelled { await Task.yield() }
    }

    @Test(
        "a task waiting on a closed gate returns when it is cancelled; the gate stays closed",
        .timeLimit(.minutes(1))
    )
    func gateWaitEndsOnCancellation() async {
        let gate = Gate()
        let waiter = Task { await gate.wait() }
        await Self.waitUntil(1) { gate.waiterCount }
        waiter.cancel()
        // The cancellation handler takes the waiter out and resumes it as `cancel()` runs.
        #expect(gate.waiterCount == 0)
        #expect(!gate.isOpen)
        // Opened only if it did not, so that this test fails rather than hangs.
        if gate.waiterCount > 0 { gate.open() }
        await waiter.value
    }

    @Test("a task cancelled before it waits on a closed gate does not wait", .timeLimit(.minutes(1)))
    func gateWaitCancelledBeforehand() async {
        let gate = Gate()
        let hasReturned = Atomic(false)
        let waiter = Task {
            // Its cancellation handler runs at once, before there is a waiter to resume.
            withUnsafeCurrentTask { $0?.cancel() }
            await gate.wait()
            hasReturned.store(true, ordering: .sequentiallyConsistent)
        }
        // Either it returns, or it stays held (the fault this test is for).
        while !hasReturned.load(ordering: .sequentiallyConsistent), gate.waiterCount == 0, !Task.isCancelled {
            await Task.yield()
        }
        #expect(gate.waiterCount == 0)
        if gate.waiterCount > 0 { gate.open() }
        await waiter.value
        #expect(!gate.isOpen)
    }

    @Test("a cancelled waiter leaves the others waiting, and open() resumes them", .timeLimit(.minutes(1)))
    func gateCancelOneOfMany() async {
        let gate = Gate()
        let cancelled = Task { await gate.wait() }
        let others = (0..<3).map { _ in Task { await gate.wait() } }
        await Self.waitUntil(4) { gate.waiterCount }
        cancelled.cancel()
        #expect(gate.waiterCount == 3)
        if gate.waiterCount > 3 { gate.open() }
        await cancelled.value
        gate.open()
        for other in others { await other.value }
        #expect(gate.waiterCount == 0)
        // Later waiters pass at once.
        await gate.wait()
    }

    @Test("a task waiting on a countdown returns when it is cancelled", .timeLimit(.minutes(1)))
    func countdownWaitEndsOnCancellation() async {
        let countdown = Countdown()
        countdown.increment()
        let waiter = Task { await countdown.wait(for: 2) }
        await Self.waitUntil(1) { countdown.waiterCount }
        waiter.cancel()
        #expect(countdown.waiterCount == 0)
        #expect(countdown.count == 1)
        if countdown.waiterCount > 0 { countdown.increment() }
        await waiter.value
    }

    @Test("a task cancelled before it waits on a countdown does not wait", .timeLimit(.minutes(1)))
    func countdownWaitCancelledBeforehand() async {
        let countdown = Countdown()
        let hasReturned = Atomic(false)
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await countdown.wait(for: 1)
            hasReturned.store(true, ordering: .sequentiallyConsistent)
        }
        while !hasReturned.load(ordering: .sequentiallyConsistent), countdown.waiterCount == 0, !Task.isCancelled {
            await Task.yield()
        }
        #expect(countdown.waiterCount == 0)
        if countdown.waiterCount > 0 { countdown.increment() }
        await waiter.value
    }

    @Test("a countdown resumes each waiter when its count is reached, and no other", .timeLimit(.minutes(1)))
    func countdownResumesInTurn() async {
        let countdown = Countdown()
        let first = Task { await countdown.wait(for: 1) }
        let second = Task { await countdown.wait(for: 2) }
        await Self.waitUntil(2) { countdown.waiterCount }
        countdown.increment()
        await first.value
        #expect(countdown.waiterCount == 1)
        countdown.increment()
        await second.value
        #expect(countdown.waiterCount == 0)
        await countdown.wait(for: 2)
    }
}
