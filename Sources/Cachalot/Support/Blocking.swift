/// Where the loader's async work runs, for a caller whose task prefers an executor of its own.
///
/// `cachalot serve` runs each connection's task on the event loop that reads its requests, so
/// that a miss crosses no thread between the client, the loader and the origin (a hop to another
/// thread and back costs more than a small hit: docs/serve.md). An event loop must never wait on
/// a file, a lock held by another process or the journal: the loader's async paths do such work through
/// ``withBlockingAllowed(_:)``, which moves it to the global concurrent executor for the task
/// that prefers another, and the flights a load starts run on ``executor``, as its caller's
/// task does. A caller without a preference (a library user's task, the CLI) sees neither: its
/// work runs where it ran before, with no hop.
package enum TaskPreference {
    /// The executor that the tasks a load starts for its caller prefer (its flight to the
    /// origin): set beside the caller's own preference (`withTaskExecutorPreference`), so that
    /// the exchange that answers the caller runs where the caller runs. Default: `nil`, the
    /// global concurrent executor.
    @TaskLocal package static var executor: (any TaskExecutor)?
}

/// Runs `work`, which may wait on the file system, where waiting is allowed.
///
/// In a task that prefers an executor of its own (an event loop), `work` runs on the global
/// concurrent executor, and so do the flights it starts (``TaskPreference/executor`` is `nil`
/// for its length: the image pipeline's flights read their variants from disk); the task goes
/// back to its executor when `work` returns. In any other task `work` runs in place: the check
/// costs a few nanoseconds and no hop.
package func withBlockingAllowed<T, Failure: Error>(
    _ work: () async throws(Failure) -> T
) async throws(Failure) -> T {
    let prefersAnExecutor = withUnsafeCurrentTask { task in task?.unownedTaskExecutor != nil }
    guard prefersAnExecutor else { return try await work() }
    let result: Result<T, Failure> = await withTaskExecutorPreference(globalConcurrentExecutor) {
        await TaskPreference.$executor.withValue(nil) {
            do throws(Failure) {
                return .success(try await work())
            } catch {
                return .failure(error)
            }
        }
    }
    return try result.get()
}
