import NIOCore
import Synchronization

/// Runs an operation for at most a given time: past it, the caller goes on with an error while
/// the operation is cancelled, without waiting for it to notice. A database that hangs must
/// not hold a load for longer than its timeout, and a query already sent cannot be stopped.
enum Deadline {
    /// The error of an operation that ran out of time.
    struct Exceeded: Error, CustomStringConvertible {
        var timeout: Duration
        var description: String { "no answer within \(self.timeout)" }
    }

    /// The result of `operation`, or ``Exceeded`` once `timeout` has passed, timed on
    /// `eventLoop`.
    static func run<Result: Sendable>(
        within timeout: Duration,
        on eventLoop: any EventLoop,
        _ operation: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
        try Task.checkCancellation()
        let race = Race<Result>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                race.waiter.withLock { $0 = continuation }
                let task = Task {
                    let result: Swift.Result<Result, any Error>
                    do { result = .success(try await operation()) } catch { result = .failure(error) }
                    race.timer.withLock { $0 }?.cancel()
                    race.finish(with: result)
                }
                race.task.withLock { $0 = task }
                // Cancelled before the handler could see the task: cancel it here.
                if Task.isCancelled { task.cancel() }
                let timer = eventLoop.scheduleTask(in: TimeAmount(timeout)) {
                    if race.finish(with: .failure(Exceeded(timeout: timeout))) { task.cancel() }
                }
                race.timer.withLock { $0 = timer }
            }
        } onCancel: {
            race.task.withLock { $0 }?.cancel()
        }
    }

    /// The state an operation and its timer share: whichever finishes first resumes the caller.
    private final class Race<Result: Sendable>: Sendable {
        let waiter = Mutex<CheckedContinuation<Result, any Error>?>(nil)
        let task = Mutex<Task<Void, Never>?>(nil)
        let timer = Mutex<Scheduled<Void>?>(nil)

        /// Resumes the caller with `result` unless it was resumed already; returns whether it was not.
        @discardableResult
        func finish(with result: Swift.Result<Result, any Error>) -> Bool {
            guard let waiter = self.waiter.withLock({ $0.take() }) else { return false }
            waiter.resume(with: result)
            return true
        }
    }
}
