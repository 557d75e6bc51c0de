import Cachalot
import CachalotTesting
import Foundation
import Synchronization
import Testing

@testable import CachalotImages

/// The threads image work runs on: its own, bounded, with a queue that refuses past its limit
/// and drops work whose task was cancelled before it started.
@Suite("Image workers", .timeLimit(.minutes(1)))
struct ImageWorkersTests {
    /// Waits until the workers hold `waiting` jobs that wait for a thread.
    static func waitUntil(_ workers: ImageWorkers, waiting: Int) async {
        while workers.statistics.waiting != waiting { await Task.yield() }
    }

    @Test("work runs on the workers' own threads, not on the cooperative pool")
    func ownThreads() async throws {
        let workers = try ImageWorkers(threads: 2)
        let (name, task) = try await workers.run {
            (
                (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "",
                withUnsafeCurrentTask { $0 != nil }
            )
        }
        // Outside any task: not one of Swift's cooperative threads.
        #expect(!task)
        #if os(Linux)
        #expect(name == "cachalot-img-1\n" || name == "cachalot-img-2\n")
        #endif
        #expect(workers.statistics.completed == 1)
    }

    @Test("at most as many jobs run as there are threads; the others wait, then run")
    func boundedConcurrency() async throws {
        let workers = try ImageWorkers(threads: 2)
        let gate = ThreadGate()
        let jobs = (0..<3).map { number in Task { try await workers.run { gate.wait() } } }
        var arrivals = gate.arrivals.makeAsyncIterator()
        _ = await arrivals.next()
        _ = await arrivals.next()
        await Self.waitUntil(workers, waiting: 1)
        #expect(workers.statistics.running == 2)
        gate.open()
        for job in jobs { try await job.value }
        #expect(workers.statistics == .init(running: 0, waiting: 0, completed: 3, cancelled: 0, refused: 0))
    }

    @Test("past the queue's limit a job is refused as busy, and never runs")
    func refusedPastTheLimit() async throws {
        let workers = try ImageWorkers(threads: 1, queueLimit: 1)
        let gate = ThreadGate()
        let running = Task { try await workers.run { gate.wait() } }
        var arrivals = gate.arrivals.makeAsyncIterator()
        _ = await arrivals.next()
        let waiting = Task { try await workers.run { 2 } }
        await Self.waitUntil(workers, waiting: 1)
        let ran = Countdown()
        await #expect(throws: ImageError(.busy, "every image thread is busy, and its queue (1 images) is full")) {
            try await workers.run { ran.increment() }
        }
        gate.open()
        try await running.value
        #expect(try await waiting.value == 2)
        #expect(ran.count == 0)
        #expect(workers.statistics.refused == 1 && workers.statistics.completed == 2)
    }

    @Test("a job whose task is cancelled while it waits ends at once and never runs")
    func cancelledWhileWaiting() async throws {
        let workers = try ImageWorkers(threads: 1)
        let gate = ThreadGate()
        let running = Task { try await workers.run { gate.wait() } }
        var arrivals = gate.arrivals.makeAsyncIterator()
        _ = await arrivals.next()
        let ran = Countdown()
        let waiting = Task { try await workers.run { ran.increment() } }
        await Self.waitUntil(workers, waiting: 1)
        waiting.cancel()
        // Answered while the only thread is still held.
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(workers.statistics.cancelled == 1 && workers.statistics.waiting == 0)
        gate.open()
        try await running.value
        // A job after it runs: the thread passed over the cancelled one.
        #expect(try await workers.run { 3 } == 3)
        #expect(ran.count == 0)
        #expect(workers.statistics.completed == 2)
    }

    @Test("a task cancelled before it asks gets CancellationError, and nothing runs")
    func cancelledBefore() async throws {
        let workers = try ImageWorkers(threads: 1)
        let ran = Countdown()
        let job = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await workers.run { ran.increment() }
        }
        await #expect(throws: CancellationError.self) { try await job.value }
        #expect(ran.count == 0)
    }

    @Test("work that goes on with a decoded image runs before new images, past the limit")
    func continuingWorkFirst() async throws {
        let workers = try ImageWorkers(threads: 1, queueLimit: 1)
        let gate = ThreadGate()
        let order = Recorded()
        let running = Task { try await workers.run { gate.wait() } }
        var arrivals = gate.arrivals.makeAsyncIterator()
        _ = await arrivals.next()
        let new = Task { try await workers.run { order.append("new") } }
        await Self.waitUntil(workers, waiting: 1)
        let continuing = Task { try await workers.run(first: true) { _ in order.append("continuing") } }
        await Self.waitUntil(workers, waiting: 2)
        gate.open()
        try await running.value
        try await new.value
        try await continuing.value
        #expect(order.values == ["continuing", "new"])
        #expect(workers.statistics.refused == 0)
    }

    /// An object whose release a test watches.
    final class Captured: Sendable {}

    @Test("a job lets go of what its work captured once it has run, or once it is cancelled while waiting")
    func jobsLetGo() async throws {
        let workers = try ImageWorkers(threads: 1)
        weak var ran: Captured?
        do {
            let captured = Captured()
            ran = captured
            try await workers.run { _ = captured }
        }
        #expect(ran == nil)

        let gate = ThreadGate()
        let running = Task { try await workers.run { gate.wait() } }
        var arrivals = gate.arrivals.makeAsyncIterator()
        _ = await arrivals.next()
        weak var cancelled: Captured?
        let waiting: Task<Void, any Error>
        do {
            let captured = Captured()
            cancelled = captured
            waiting = Task { try await workers.run { _ = captured } }
        }
        await Self.waitUntil(workers, waiting: 1)
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        // Let go while the only thread is still held: not when a thread passes over the job.
        #expect(cancelled == nil)
        gate.open()
        try await running.value
    }

    @Test("a running job is told that its task was cancelled, to stop between steps")
    func runningJobSeesCancellation() async throws {
        let workers = try ImageWorkers(threads: 1)
        let gate = ThreadGate()
        let job = Task {
            try await workers.run(first: false) { cancellation in
                gate.wait()
                return cancellation.isCancelled
            }
        }
        var arrivals = gate.arrivals.makeAsyncIterator()
        _ = await arrivals.next()
        job.cancel()
        gate.open()
        #expect(try await job.value)
    }

    /// Names appended from the workers' threads, in order.
    final class Recorded: Sendable {
        private let state = Mutex<[String]>([])
        func append(_ name: String) { self.state.withLock { $0.append(name) } }
        var values: [String] { self.state.withLock { $0 } }
    }

    @Test("no threads, or a negative queue limit, is refused")
    func invalid() {
        #expect(throws: CacheError.self) { try ImageWorkers(threads: 0) }
        #expect(throws: CacheError.self) { try ImageWorkers(threads: 1, queueLimit: -1) }
    }
}
