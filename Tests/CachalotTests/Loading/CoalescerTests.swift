import Synchronization
import Testing

@testable import Cachalot

@Suite("Coalescer")
struct CoalescerTests {
    @Test("a run's deferred work runs after the answer in a task of background priority, counted until it is done")
    func deferredWork() async throws {
        let pending = PendingWork()
        let coalescer = Coalescer<Int>(counting: pending)
        let observed = Mutex<TaskPriority?>(nil)
        let value = try await coalescer.run("key", priority: 0, progress: nil) { run in
            run.afterAnswering.add { observed.withLock { $0 = Task.currentPriority } }
            return 7
        }
        #expect(value == 7)
        await pending.waitUntilIdle()
        #expect(observed.withLock { $0 } == .background)
    }
}
