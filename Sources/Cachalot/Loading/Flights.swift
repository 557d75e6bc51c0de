import Synchronization

/// Runs one operation per key at a time, however many callers ask for it, and gives each
/// caller its answer: the loader's one coalescer, for whole answers, streamed answers and
/// background revalidations alike.
///
/// A run answers its callers once: when its operation returns, or earlier, when the operation
/// calls ``Run/answer``, and then goes on (reading a body that its callers read as it arrives,
/// say). Until the run ends, a caller that joins it after that answer gets the answer at once.
///
/// A caller that is cancelled while it waits stops waiting at once with `CancellationError`;
/// the others go on waiting. When the last waiting caller of a run that has not answered has
/// gone, the run is cancelled; a run that has answered, or was started without a caller
/// (``start(_:priority:operation:)``), runs on until it ends or ``cancelUnwaited()``. A run's
/// priority is that of its most urgent caller, and ``init(counting:onPriorityChange:)`` hears
/// when a caller raises it.
package final class Flights<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// What a run knows of itself.
    package struct Run: Sendable {
        /// Unique among runs.
        package let id: Int
        /// The priority of its most urgent caller when it started.
        package let priority: Int
        /// Tells the run's current callers how far it got.
        package let report: @Sendable (LoadProgress) -> Void
        /// Answers the run's callers now, and those who join it until it ends; what the
        /// operation returns after that is dropped.
        package let answer: @Sendable (Value) -> Void
        /// Work the run does once its callers have their answer.
        package let afterAnswering = DeferredWork()
    }

    /// What a caller gets: the run's answer, and whether the caller joined a run that another
    /// started.
    package typealias Boarding = (value: Value, joined: Bool)

    /// A caller waiting for a run. It is resumed exactly once: by whoever takes it out of
    /// ``state`` under the lock (the run's answer or end, or the caller leaving), or by
    /// ``join(_:_:_:_:)`` when it never went in. So its continuation is unchecked: a checked
    /// one's type is generic over `Value`, and every copy of a waiter looked its metadata up
    /// at run time, 2 % of a miss's instructions (docs/performance.md).
    private struct Waiter {
        var continuation: UnsafeContinuation<Boarding, any Error>
        var priority: Int
        var progress: (@Sendable (LoadProgress) -> Void)?
        var joined: Bool
    }

    private struct Flight {
        var id: Int
        var task: Task<Void, Never>?
        var waiters: [Int: Waiter]
        var priority: Int
        /// The answer given early, which later callers get at once.
        var answer: Value?
        /// Whether the run goes on when no caller waits for it.
        var outlivesCallers: Bool
    }

    /// What joining a run came to.
    private enum Outcome {
        case cancelled
        case answered(Value)
        case joined(raised: (run: Int, priority: Int)?)
        case started(Int)
    }

    private struct State {
        var nextID = 0
        var flights: [Key: Flight] = [:]
    }

    private let state = Mutex(State())
    private let running: PendingWork
    private let onPriorityChange: @Sendable (_ run: Int, _ priority: Int) -> Void

    /// - Parameters:
    ///   - running: Counts each run from its start until its task ends, after the work it
    ///     deferred: a run whose callers all left still finishes cleaning up (removing a
    ///     temporary file, say), and waiting on `running` waits for that too.
    ///   - onPriorityChange: Called, outside any lock, when a run's priority changes: a more
    ///     urgent caller joined, or a caller's priority was changed.
    package init(
        counting running: PendingWork,
        onPriorityChange: @escaping @Sendable (_ run: Int, _ priority: Int) -> Void = { _, _ in }
    ) {
        self.running = running
        self.onPriorityChange = onPriorityChange
    }

    /// The number of callers waiting for runs.
    var callers: Int {
        self.state.withLock { $0.flights.values.reduce(0) { $0 + $1.waiters.count } }
    }

    /// The number of callers waiting for the run for `key`; `nil` if none is in flight: for tests.
    func callers(of key: Key) -> Int? {
        self.state.withLock { $0.flights[key]?.waiters.count }
    }

    /// The answer the run for `key` gave early and goes on from; `nil` if it gave none: for tests.
    func answer(of key: Key) -> Value? {
        self.state.withLock { $0.flights[key]?.answer }
    }

    /// Returns the answer of the run in flight for `key`, or of a new one that `operation` makes.
    ///
    /// - Parameter onWaiting: Told the caller's number among the run's callers, for
    ///   ``setPriority(_:key:caller:)``.
    package func run(
        _ key: Key,
        priority: Int,
        progress: (@Sendable (LoadProgress) -> Void)?,
        onWaiting: (@Sendable (_ caller: Int) -> Void)? = nil,
        operation: @escaping @Sendable (Run) async throws -> Value
    ) async throws -> Boarding {
        let waiterID = self.state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        onWaiting?(waiterID)
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                self.join(
                    key,
                    waiterID,
                    Waiter(continuation: continuation, priority: priority, progress: progress, joined: false),
                    operation
                )
            }
        } onCancel: {
            self.leave(key, waiterID)
        }
    }

    /// Starts a run for `key` that no caller waits for, unless one is in flight.
    ///
    /// - Returns: Whether it started one.
    @discardableResult
    package func start(_ key: Key, priority: Int, operation: @escaping @Sendable (Run) async throws -> Value) -> Bool {
        let id = self.state.withLock { state -> Int? in
            guard state.flights[key] == nil else { return nil }
            state.nextID += 1
            state.flights[key] = Flight(
                id: state.nextID,
                waiters: [:],
                priority: priority,
                outlivesCallers: true
            )
            return state.nextID
        }
        guard let id else { return false }
        self.launch(key, id: id, priority: priority, operation)
        return true
    }

    private func join(
        _ key: Key,
        _ waiterID: Int,
        _ waiter: Waiter,
        _ operation: @escaping @Sendable (Run) async throws -> Value
    ) {
        var waiter = waiter
        let outcome = self.state.withLock { state -> Outcome in
            // Cancelled before it could join: the cancellation handler found nothing to remove.
            if Task.isCancelled { return .cancelled }
            if var flight = state.flights[key] {
                if let answer = flight.answer { return .answered(answer) }
                waiter.joined = true
                flight.waiters[waiterID] = waiter
                let raised = waiter.priority > flight.priority
                if raised { flight.priority = waiter.priority }
                state.flights[key] = flight
                return .joined(raised: raised ? (flight.id, waiter.priority) : nil)
            }
            state.nextID += 1
            state.flights[key] = Flight(
                id: state.nextID,
                waiters: [waiterID: waiter],
                priority: waiter.priority,
                outlivesCallers: false
            )
            return .started(state.nextID)
        }
        switch outcome {
        case .cancelled:
            waiter.continuation.resume(throwing: CancellationError())
        case .answered(let value):
            waiter.continuation.resume(returning: (value, true))
        case .joined(let raised):
            if let (run, priority) = raised { self.onPriorityChange(run, priority) }
        case .started(let id):
            self.launch(key, id: id, priority: waiter.priority, operation)
        }
    }

    /// Starts the task of the run `id` for `key`, which its flight holds already.
    private func launch(
        _ key: Key,
        id: Int,
        priority: Int,
        _ operation: @escaping @Sendable (Run) async throws -> Value
    ) {
        let run = Run(
            id: id,
            priority: priority,
            report: { [weak self] progress in self?.report(progress, key: key, run: id) },
            answer: { [weak self] value in self?.answer(key, run: id, with: value) }
        )
        self.running.begin()
        // The operation (and what it holds, a loader, say) is let go as soon as it returns:
        // before the run counts as ended, not when the task's closure happens to be freed.
        let operation = Claim(operation)
        // On the executor its caller's task prefers, if it names one (``TaskPreference``): a
        // flight started from an event loop's task exchanges with the origin on that loop.
        let task = Task(executorPreference: TaskPreference.executor) {
            await self.perform(operation.take(), run, key: key)
            guard !run.afterAnswering.isEmpty else {
                self.running.end()
                return
            }
            // The callers' continuations are queued now. The deferred work goes to a task of
            // lower priority, so that this thread takes up a caller next: doing the work here
            // first left the callers waiting for another thread to be woken for them.
            Task(priority: .background) {
                run.afterAnswering.run()
                self.running.end()
            }
        }
        let isAbandoned = self.state.withLock { state in
            guard state.flights[key]?.id == id else { return true }
            state.flights[key]?.task = task
            return false
        }
        // Every caller left before the task was recorded.
        if isAbandoned { task.cancel() }
    }

    /// Runs `operation` and gives its callers the result. What it returned is let go when this
    /// returns, before the run counts as ended: the answer may hold a file open, and a caller
    /// that waited for the loader's work to end may remove the file system it is on.
    private func perform(
        _ operation: (@Sendable (Run) async throws -> Value)?,
        _ run: Run,
        key: Key
    ) async {
        let result: Result<Value, any Error>
        if let operation {
            do {
                result = .success(try await operation(run))
            } catch {
                result = .failure(error)
            }
        } else {
            result = .failure(CancellationError())
        }
        self.finish(key, run: run.id, with: result)
    }

    /// Changes the priority of one caller of the run for `key`; the run takes the priority of
    /// its most urgent caller. Does nothing if the caller is not waiting.
    func setPriority(_ priority: Int, key: Key, caller: Int) {
        let changed = self.state.withLock { state -> (run: Int, priority: Int)? in
            guard var flight = state.flights[key], flight.waiters[caller] != nil else { return nil }
            flight.waiters[caller]?.priority = priority
            let highest = flight.waiters.values.map(\.priority).max() ?? priority
            defer { state.flights[key] = flight }
            guard highest != flight.priority else { return nil }
            flight.priority = highest
            return (flight.id, highest)
        }
        if let (run, priority) = changed { self.onPriorityChange(run, priority) }
    }

    /// Cancels the runs that no caller waits for: those that answered early and go on, and
    /// those started without a caller.
    func cancelUnwaited() {
        let tasks = self.state.withLock { state in
            state.flights.values.filter { $0.waiters.isEmpty && $0.outlivesCallers }.compactMap(\.task)
        }
        for task in tasks { task.cancel() }
    }

    private func leave(_ key: Key, _ waiterID: Int) {
        let (waiter, abandoned) = self.state.withLock { state -> (Waiter?, Task<Void, Never>?) in
            guard var flight = state.flights[key], let waiter = flight.waiters.removeValue(forKey: waiterID) else {
                return (nil, nil)
            }
            if flight.waiters.isEmpty && !flight.outlivesCallers {
                state.flights[key] = nil
                return (waiter, flight.task)
            }
            state.flights[key] = flight
            return (waiter, nil)
        }
        waiter?.continuation.resume(throwing: CancellationError())
        abandoned?.cancel()
    }

    private func answer(_ key: Key, run: Int, with value: Value) {
        let waiters = self.state.withLock { state -> [Waiter] in
            guard var flight = state.flights[key], flight.id == run, flight.answer == nil else { return [] }
            flight.answer = value
            flight.outlivesCallers = true
            defer {
                flight.waiters = [:]
                state.flights[key] = flight
            }
            return Array(flight.waiters.values)
        }
        for waiter in waiters { waiter.continuation.resume(returning: (value, waiter.joined)) }
    }

    private func finish(_ key: Key, run: Int, with result: Result<Value, any Error>) {
        let waiters = self.state.withLock { state -> [Waiter] in
            guard let flight = state.flights[key], flight.id == run else { return [] }
            state.flights[key] = nil
            return Array(flight.waiters.values)
        }
        for waiter in waiters { waiter.continuation.resume(with: result.map { ($0, waiter.joined) }) }
    }

    private func report(_ progress: LoadProgress, key: Key, run: Int) {
        let handlers = self.state.withLock { state -> [@Sendable (LoadProgress) -> Void] in
            guard let flight = state.flights[key], flight.id == run else { return [] }
            return flight.waiters.values.compactMap(\.progress)
        }
        for handler in handlers { handler(progress) }
    }
}

/// How much of a body has arrived.
public struct LoadProgress: Sendable, Hashable {
    /// The bytes received so far.
    public var received: Int
    /// The length the response announced with `Content-Length`; `nil` if it announced none.
    public var expected: Int?

    /// Creates a progress report.
    public init(received: Int, expected: Int?) {
        self.received = received
        self.expected = expected
    }
}

/// Work to do after a run's callers are answered, such as writing what they got to disk.
package final class DeferredWork: Sendable {
    private let work = Mutex<[@Sendable () -> Void]>([])

    package func add(_ work: @escaping @Sendable () -> Void) {
        self.work.withLock { $0.append(work) }
    }

    var isEmpty: Bool {
        self.work.withLock { $0.isEmpty }
    }

    /// Does the work added, and lets go of it (and what it holds) before returning.
    func run() {
        let work = self.work.withLock { work in
            defer { work = [] }
            return work
        }
        for item in work { item() }
    }
}
