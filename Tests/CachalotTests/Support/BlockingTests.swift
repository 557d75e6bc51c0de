import Dispatch
import Testing

@testable import Cachalot

/// A task executor on a serial queue that knows whether it is running a job.
final class QueueExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "QueueExecutor")
    private let key = DispatchSpecificKey<Bool>()

    init() {
        self.queue.setSpecific(key: self.key, value: true)
    }

    /// Whether the caller runs on this executor's queue.
    var isCurrent: Bool { DispatchQueue.getSpecific(key: self.key) == true }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

@Suite("Work that may wait leaves an executor its task prefers")
struct BlockingTests {
    @Test("In a task that prefers an executor, the work runs elsewhere, and the task comes back to it after")
    func leavesThePreferredExecutor() async {
        let executor = QueueExecutor()
        let places = await Task(executorPreference: executor) {
            let before = executor.isCurrent
            let during = await withBlockingAllowed { executor.isCurrent }
            return (before, during, executor.isCurrent)
        }.value
        #expect(places == (true, false, true))
    }

    @Test("A flight started by a task that names an executor in TaskPreference runs on it; without, elsewhere")
    func flightRunsOnTheNamedExecutor() async throws {
        let executor = QueueExecutor()
        let flights = Flights<String, Bool>(counting: PendingWork())
        let named = try await Task(executorPreference: executor) {
            try await TaskPreference.$executor.withValue(executor) {
                try await flights.run("named", priority: 0, progress: nil) { _ in executor.isCurrent }.value
            }
        }.value
        #expect(named)
        // The caller's own preference alone does not carry over to the flight's task.
        let unnamed = try await Task(executorPreference: executor) {
            try await flights.run("unnamed", priority: 0, progress: nil) { _ in executor.isCurrent }.value
        }.value
        #expect(!unnamed)
    }
}
