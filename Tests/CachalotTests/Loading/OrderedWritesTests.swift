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
        writes.enqueue {
            started.signal()
            gate.wait()
            made.withLock { $0.append(1) }
        }
        // A drainer on a thread of its own holds the first write open.
        Thread { writes.drain() }.start()
        started.wait()
        writes.enqueue {
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
        writes.enqueue { made.add(1, ordering: .relaxed) }
        writes.enqueue { made.add(1, ordering: .relaxed) }
        Task.detached { writes.drain() }
        await pending.waitUntilIdle()
        #expect(made.load(ordering: .relaxed) == 2)
    }
}
