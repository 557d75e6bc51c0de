import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Cachalot

@Suite("OrderedWrites")
struct OrderedWritesTests {
    @Test("writes are made one at a time in the order queued, whichever caller drains")
    func order() {
        let pending = PendingWork()
        let writes = OrderedWrites(counting: pending)
        let made = Mutex<[Int]>([])
        let (started, gate, done) = (
            DispatchSemaphore(value: 0), DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)
        )
        _ = writes.enqueue(bytes: 1) {
            started.signal()
            gate.wait()
            made.withLock { $0.append(1) }
        }
        // A drainer on a thread of its own holds the first write open.
        Thread { writes.drain() }.start()
        started.wait()
        _ = writes.enqueue(bytes: 1) {
            made.withLock { $0.append(2) }
            done.signal()
        }
        // Another caller drains meanwhile: the second write must wait for the first.
        writes.drain()
        #expect(made.withLock { $0 }.isEmpty)
        gate.signal()
        done.wait()
        #expect(made.withLock { $0 } == [1, 2])
    }

    @Test("queued writes count as pending work until made")
    func pendingUntilMade() async {
        let pending = PendingWork()
        let writes = OrderedWrites(counting: pending)
        let made = Atomic<Int>(0)
        _ = writes.enqueue(bytes: 1) { made.add(1, ordering: .relaxed) }
        _ = writes.enqueue(bytes: 1) { made.add(1, ordering: .relaxed) }
        Task.detached { writes.drain() }
        await pending.waitUntilIdle()
        #expect(made.load(ordering: .relaxed) == 2)
    }

    @Test("a write is let go, with what it holds, before it counts as made")
    func writeLetGoBeforeMade() async {
        let pending = PendingWork()
        let writes = OrderedWrites(counting: pending)
        let outcome = ReleaseProbe.Outcome()
        Self.enqueueHolding(ReleaseProbe(counting: pending, noting: outcome), into: writes)
        Task.detached { writes.drain() }
        await pending.waitUntilIdle()
        #expect(outcome.wasPendingAtRelease == true)
    }

    /// Queues a write that holds `probe`, and nothing else does.
    private static func enqueueHolding(_ probe: ReleaseProbe, into writes: OrderedWrites) {
        _ = writes.enqueue(bytes: 1) { _ = probe }
    }

    @Test(
        "a task waiting for the backlog resumes once enough of the writes before it are made",
        .timeLimit(.minutes(1))
    )
    func backlog() async {
        let writes = OrderedWrites(counting: PendingWork())
        let gate = DispatchSemaphore(value: 0)
        let made = Mutex<[Int]>([])
        let first = writes.enqueue(bytes: 100) {
            gate.wait()
            made.withLock { $0.append(1) }
        }
        #expect(first.backlog == 100 && first.number == 1)
        let second = writes.enqueue(bytes: 50) { made.withLock { $0.append(2) } }
        #expect(second.backlog == 150 && second.number == 2)
        // Under the bound already: no wait.
        await writes.wait(untilBacklogIsAtMost: 150)
        let waiter = Task { () -> [Int] in
            await writes.wait(untilBacklogIsAtMost: 50)
            return made.withLock { $0 }
        }
        while writes.waiterCount == 0, !Task.isCancelled { await Task.yield() }
        Thread { writes.drain() }.start()
        gate.signal()
        // Resumed after the first write (100 bytes) was made, when 50 bytes were left.
        #expect(await waiter.value.first == 1)
    }

    @Test("a task waiting for its own write resumes once it and the writes before it are made", .timeLimit(.minutes(1)))
    func ownWrite() async {
        let writes = OrderedWrites(counting: PendingWork())
        let gate = DispatchSemaphore(value: 0)
        let made = Mutex<[Int]>([])
        _ = writes.enqueue(bytes: 1) {
            gate.wait()
            made.withLock { $0.append(1) }
        }
        let second = writes.enqueue(bytes: 1) { made.withLock { $0.append(2) } }
        let waiter = Task { () -> [Int] in
            await writes.wait(untilMade: second)
            return made.withLock { $0 }
        }
        while writes.waiterCount == 0, !Task.isCancelled { await Task.yield() }
        Thread { writes.drain() }.start()
        gate.signal()
        #expect(await waiter.value == [1, 2])
    }
}
