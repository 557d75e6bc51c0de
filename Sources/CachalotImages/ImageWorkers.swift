import CCachalotCore
import Cachalot
import Foundation
import Synchronization

/// The threads image work runs on: decoding, processing and encoding, each a call that holds
/// its thread until it returns.
///
/// Swift's cooperative pool has one thread per core, and it also carries everything else a
/// program awaits: in `cachalot serve`, the proxy's misses, revalidations and health checks. An
/// AVIF encode holds a thread for tens of milliseconds, so image work on that pool stalls the
/// rest. An ``ImagePipeline`` therefore runs its work here: on threads of its own, as many as
/// ``threadCount``, with at most ``queueLimit`` jobs waiting for one.
///
/// ```swift
/// let workers = try ImageWorkers(threads: 2, queueLimit: 16)
/// let bitmap = try await workers.run { try ImageDecoder().decode(data) }
/// ```
///
/// A job whose task is cancelled while it waits never runs: ``run(_:)`` throws
/// `CancellationError` at once. A job that has started runs to its end (a codec call cannot be
/// stopped halfway); its caller then gets its value, and checks for cancellation itself before
/// it asks for more work. A job holds what its work captured only until it has run or been
/// cancelled. The threads end when the workers are released, once the jobs queued have run.
public final class ImageWorkers: Sendable {
    /// What the workers have done since they were made, and what they hold now.
    public struct Statistics: Sendable, Hashable {
        /// Jobs running now.
        public var running: Int
        /// Jobs waiting for a thread now.
        public var waiting: Int
        /// Jobs that have run to their end.
        public var completed: Int
        /// Jobs whose task was cancelled while they waited; they did not run.
        public var cancelled: Int
        /// Jobs refused because ``queueLimit`` jobs were waiting already.
        public var refused: Int
    }

    /// How many jobs run at once: the number of threads.
    public let threadCount: Int
    /// The most jobs that may wait for a thread; one more is refused. `nil`: no limit.
    public let queueLimit: Int?
    private let queue: JobQueue

    /// The default number of threads: one fewer than the active processors, and at least one,
    /// so that one core stays for everything else.
    public static var defaultThreadCount: Int { max(1, ProcessInfo.processInfo.activeProcessorCount - 1) }

    /// Starts `threads` threads.
    ///
    /// - Parameters:
    ///   - threads: How many jobs run at once. Default: ``defaultThreadCount``.
    ///   - queueLimit: The most jobs waiting for a thread; `nil` for no limit. Default: `nil`.
    /// - Throws: `CacheError` with code `invalidConfiguration` if `threads` is less than 1 or
    ///   `queueLimit` is negative.
    public init(threads: Int = ImageWorkers.defaultThreadCount, queueLimit: Int? = nil) throws(CacheError) {
        guard threads > 0 else { throw CacheError(.invalidConfiguration, "Image work needs at least one thread.") }
        guard (queueLimit ?? 0) >= 0 else {
            throw CacheError(.invalidConfiguration, "The image work queue's limit cannot be negative.")
        }
        self.threadCount = threads
        self.queueLimit = queueLimit
        self.queue = JobQueue(threads: threads, limit: queueLimit)
        for number in 1...threads {
            let queue = self.queue
            // As `top -H` shows it (15 bytes at most on Linux).
            let name = "cachalot-img-\(number)"
            let thread = Thread {
                cachalot_name_this_thread(name)
                queue.work()
            }
            // Codecs (libavif's encoder, libjpeg) use deep stacks; as a main thread's.
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    deinit {
        self.queue.stop()
    }

    /// What the workers have done, and what they hold now.
    public var statistics: Statistics { self.queue.statistics }

    /// Runs `work` on one of the threads when one is free, and returns what it returns.
    ///
    /// - Throws: What `work` throws; `CancellationError` if the task is cancelled before the work
    ///   starts (it then never runs); ``ImageError`` with code ``ImageError/Code/busy`` if
    ///   ``queueLimit`` jobs are waiting already.
    public func run<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await self.run(first: false) { _ in try work() }
    }

    /// Runs `work` as ``run(_:)`` does, telling it whether its task has been cancelled since it
    /// started (a job runs on a thread of its own, outside the task, where `Task.isCancelled` is
    /// always false); with `first`, ahead of the jobs waiting and past the queue's limit: for
    /// work that goes on with an image already decoded, so that its bitmap does not wait in
    /// memory behind new images.
    func run<Value: Sendable>(
        first: Bool,
        _ work: @escaping @Sendable (_ cancellation: Cancellation) throws -> Value
    ) async throws -> Value {
        let cancellation = Cancellation()
        let job = Job<Value> { try work(cancellation) }
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                if let failure = self.queue.add(job, continuation: continuation, first: first) {
                    continuation.resume(throwing: failure)
                }
            }
        } onCancel: {
            cancellation.cancel()
            self.queue.cancel(job)
        }
    }

    /// Whether the task that asked for a job has been cancelled: what the job checks between
    /// steps, since it runs outside the task.
    final class Cancellation: Sendable {
        private let flag = Atomic(false)

        /// Whether the task has been cancelled.
        var isCancelled: Bool { self.flag.load(ordering: .relaxed) }

        /// Throws `CancellationError` if the task has been cancelled.
        func check() throws {
            if self.isCancelled { throw CancellationError() }
        }

        fileprivate func cancel() {
            self.flag.store(true, ordering: .relaxed)
        }
    }

    /// Runs `work` on one of the threads, without waiting for it and past the queue's limit: for
    /// work no caller waits for, such as encoding a variant to store it.
    func start(_ work: @escaping @Sendable () -> Void) {
        self.queue.add(Job<Void>(work), continuation: nil, first: false)
    }
}

/// One job: its work, and what became of it. Its mutable state is read and written only under
/// the queue's lock.
private class QueuedJob: @unchecked Sendable {
    enum State {
        /// Made; not in the queue yet.
        case new
        case waiting
        case running
        case cancelled
    }

    var state = State.new

    /// Runs the work and lets it go; returns what hands its result on, called once the queue
    /// has counted the job done. On a worker thread, outside the lock.
    func perform() -> () -> Void { {} }

    /// Takes the job out of the caller's hands. Under the lock; what it returns resumes the
    /// caller and lets the work go, outside the lock: what the work captured may be the last
    /// reference to the workers themselves, whose release takes the lock.
    func cancellation() -> () -> Void { {} }
}

private final class Job<Value: Sendable>: QueuedJob, @unchecked Sendable {
    var work: (@Sendable () throws -> Value)?
    var continuation: UnsafeContinuation<Value, any Error>?

    init(_ work: @escaping @Sendable () throws -> Value) {
        self.work = work
    }

    override func perform() -> () -> Void {
        // Set before the job was queued, and not touched after it started.
        let work = self.work
        self.work = nil
        let result = Result { try work?() }
        let continuation = self.continuation
        self.continuation = nil
        return {
            switch result {
            case .success(let value?): continuation?.resume(returning: value)
            case .success(nil): continuation?.resume(throwing: CancellationError())
            case .failure(let error): continuation?.resume(throwing: error)
            }
        }
    }

    override func cancellation() -> () -> Void {
        let (work, continuation) = (self.work, self.continuation)
        (self.work, self.continuation) = (nil, nil)
        return {
            _ = work
            continuation?.resume(throwing: CancellationError())
        }
    }
}

/// The jobs waiting, first in first out, and the threads' loop. Everything under `condition`.
private final class JobQueue: @unchecked Sendable {
    private let condition = NSCondition()
    private let threads: Int
    private let limit: Int?
    /// Jobs in order from `head`; a slot is emptied when a thread takes its job. Cancelled jobs
    /// stay, holding nothing, until a thread passes over them.
    private var jobs: [QueuedJob?] = []
    private var head = 0
    private var isStopped = false
    private var counts = ImageWorkers.Statistics(running: 0, waiting: 0, completed: 0, cancelled: 0, refused: 0)

    init(threads: Int, limit: Int?) {
        self.threads = threads
        self.limit = limit
    }

    var statistics: ImageWorkers.Statistics {
        self.condition.lock()
        defer { self.condition.unlock() }
        return self.counts
    }

    /// Queues `job`; returns why it was not queued, for its caller to be told.
    @discardableResult
    func add<Value>(
        _ job: Job<Value>,
        continuation: UnsafeContinuation<Value, any Error>?,
        first: Bool
    ) -> (any Error)? {
        self.condition.lock()
        defer { self.condition.unlock() }
        // Cancelled before it could be queued.
        guard job.state == .new else {
            self.counts.cancelled += 1
            return CancellationError()
        }
        // Jobs queued beyond the threads free for them wait; the new one would be one more.
        let waitingForThreads = self.counts.waiting - (self.threads - self.counts.running)
        if continuation != nil, !first, let limit = self.limit, waitingForThreads >= limit {
            self.counts.refused += 1
            return ImageError(.busy, "every image thread is busy, and its queue (\(limit) images) is full")
        }
        job.continuation = continuation
        job.state = .waiting
        if first {
            self.compact()
            self.jobs.insert(job, at: self.head)
        } else {
            self.jobs.append(job)
        }
        self.counts.waiting += 1
        self.condition.signal()
        return nil
    }

    /// Takes `job` out of the queue if it waits there, and tells its caller.
    func cancel(_ job: QueuedJob) {
        self.condition.lock()
        var resume: () -> Void = {}
        switch job.state {
        case .new:
            // ``add`` will see it.
            job.state = .cancelled
        case .waiting:
            job.state = .cancelled
            self.counts.waiting -= 1
            self.counts.cancelled += 1
            resume = job.cancellation()
        case .running, .cancelled:
            break
        }
        self.condition.unlock()
        resume()
    }

    /// Lets the threads end once the jobs queued have run.
    func stop() {
        self.condition.lock()
        self.isStopped = true
        self.condition.broadcast()
        self.condition.unlock()
    }

    /// A thread's loop: runs the jobs one at a time until the queue is stopped and empty. A job,
    /// and what it hands on, is let go outside the lock.
    func work() {
        while let job = self.next() {
            let handOn = job.perform()
            self.condition.lock()
            self.counts.running -= 1
            self.counts.completed += 1
            self.condition.unlock()
            // Its caller sees the job counted.
            handOn()
        }
    }

    /// The next job to run, counted as running; waits for one; `nil` once the queue is stopped
    /// and empty.
    private func next() -> QueuedJob? {
        self.condition.lock()
        defer { self.condition.unlock() }
        while true {
            guard self.head < self.jobs.count else {
                if self.isStopped { return nil }
                self.condition.wait()
                continue
            }
            let taken = self.jobs[self.head]
            self.jobs[self.head] = nil
            self.head += 1
            if self.head > 64, self.head * 2 > self.jobs.count { self.compact() }
            guard let job = taken, job.state == .waiting else { continue }
            job.state = .running
            self.counts.waiting -= 1
            self.counts.running += 1
            return job
        }
    }

    /// Drops the slots already emptied from the front of the array.
    private func compact() {
        self.jobs.removeFirst(self.head)
        self.head = 0
    }
}
