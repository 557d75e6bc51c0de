import CachalotTesting
import Synchronization
import Testing

@testable import Cachalot

@Suite("Flights", .timeLimit(.minutes(1)))
struct FlightsTests {
    @Test("a run's deferred work runs after the answer in a task of background priority, counted until it is done")
    func deferredWork() async throws {
        let pending = PendingWork()
        let flights = Flights<String, Int>(counting: pending)
        let observed = Mutex<TaskPriority?>(nil)
        let answer = try await flights.run("key", priority: 0, progress: nil) { run in
            run.afterAnswering.add { observed.withLock { $0 = Task.currentPriority } }
            return 7
        }
        #expect(answer.value == 7 && !answer.joined)
        await pending.waitUntilIdle()
        #expect(observed.withLock { $0 } == .background)
    }

    @Test("what a run returned is let go before the run counts as ended")
    func resultLetGoBeforeEnd() async throws {
        let pending = PendingWork()
        let flights = Flights<String, ReleaseProbe>(counting: pending)
        let outcome = ReleaseProbe.Outcome()
        flights.start("key", priority: 0) { _ in ReleaseProbe(counting: pending, noting: outcome) }
        await pending.waitUntilIdle()
        #expect(outcome.wasPendingAtRelease == true)
    }

    @Test("a run's deferred work is let go before the run counts as ended")
    func deferredWorkLetGoBeforeEnd() async throws {
        let pending = PendingWork()
        let flights = Flights<String, Int>(counting: pending)
        let outcome = ReleaseProbe.Outcome()
        _ = try await flights.run("key", priority: 0, progress: nil) { run in
            let probe = ReleaseProbe(counting: pending, noting: outcome)
            run.afterAnswering.add { _ = probe }
            return 7
        }
        await pending.waitUntilIdle()
        #expect(outcome.wasPendingAtRelease == true)
    }

    @Test(
        "a run that answers early goes on: a caller that joins it then gets that answer at once, and the run ends when its operation does"
    )
    func earlyAnswer() async throws {
        let pending = PendingWork()
        let flights = Flights<String, Int>(counting: pending)
        let goOn = Gate()
        let ended = Gate()
        let first = try await flights.run("key", priority: 0, progress: nil) { run in
            run.answer(1)
            await goOn.wait()
            ended.open()
            return 2
        }
        #expect(first.value == 1 && !first.joined)
        // The run goes on; a caller that joins gets the early answer, not a run of its own.
        let second = try await flights.run("key", priority: 0, progress: nil) { _ in 3 }
        #expect(second.value == 1 && second.joined)
        #expect(flights.answer(of: "key") == 1)
        goOn.open()
        await ended.wait()
        await pending.waitUntilIdle()
        #expect(flights.answer(of: "key") == nil)
        let third = try await flights.run("key", priority: 0, progress: nil) { _ in 4 }
        #expect(third.value == 4 && !third.joined)
    }

    @Test("a run started without a caller runs to its end, one per key; cancelUnwaited cancels it")
    func startedWithoutCaller() async throws {
        let pending = PendingWork()
        let flights = Flights<String, Int>(counting: pending)
        let started = Gate()
        let cancelled = Gate()
        let isStarted = flights.start("key", priority: 0) { _ in
            started.open()
            await withTaskCancellationHandler {
                await cancelled.wait()
            } onCancel: {
                cancelled.open()
            }
            return 0
        }
        #expect(isStarted)
        await started.wait()
        #expect(!flights.start("key", priority: 0) { _ in 1 })
        flights.cancelUnwaited()
        await pending.waitUntilIdle()
        #expect(flights.callers(of: "key") == nil)
    }

    @Test("cancelUnwaited leaves a run alone while a caller waits for it")
    func waitedRunsAreNotCancelled() async throws {
        let pending = PendingWork()
        let flights = Flights<String, Int>(counting: pending)
        let started = Gate()
        let finish = Gate()
        let caller = Task {
            try await flights.run("key", priority: 0, progress: nil) { _ in
                started.open()
                await finish.wait()
                return Task.isCancelled ? -1 : 5
            }
        }
        await started.wait()
        flights.cancelUnwaited()
        finish.open()
        #expect(try await caller.value.value == 5)
        await pending.waitUntilIdle()
    }
}
