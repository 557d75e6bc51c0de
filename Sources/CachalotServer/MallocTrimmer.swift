import CCachalotMalloc
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Gives the system back, at a fixed interval, the free memory that glibc's `malloc` keeps:
/// `malloc_trim(0)`, on a thread of its own, never on an event loop.
///
/// glibc gives freed memory back to the system by itself only from the top of a heap. Bodies
/// of many sizes stored and evicted leave free holes inside the heaps, which stay resident
/// until something allocates there again. A trim returns every whole free page of every arena
/// (with `madvise`), wherever it lies; it holds each arena's lock while it walks its free
/// chunks, so an allocation on another thread may wait for it that long (see docs/serve.md,
/// "Memory", for what it costs).
///
/// It is a `Service`: ``run()`` trims until graceful shutdown or cancellation.
///
/// ```swift
/// let trimmer = MallocTrimmer(interval: .seconds(10))
/// let group = ServiceGroup(services: [server, trimmer], logger: logger)
/// ```
public final class MallocTrimmer: Service, Sendable {
    /// How long it waits between two trims.
    public let interval: Duration
    private let wait: @Sendable (Duration) async throws -> Void
    private let trim: @Sendable () -> Void
    private let totals = Mutex(Statistics())

    /// What a trimmer has done.
    public struct Statistics: Sendable, Hashable {
        /// The trims made.
        public var trims = 0
        /// The time they took, in all.
        public var duration = Duration.zero
    }

    /// Creates a trimmer.
    ///
    /// - Parameters:
    ///   - interval: How long to wait between two trims; must be positive.
    ///   - clock: The clock it waits by. Default: `ContinuousClock()`; tests pass a manual clock.
    ///   - trim: What a trim does. Default: `malloc_trim(0)` (nothing where the C library is not
    ///     glibc); tests pass their own.
    public init<C: Clock<Duration>>(
        interval: Duration,
        clock: C = ContinuousClock(),
        trim: @escaping @Sendable () -> Void = { _ = cachalot_malloc_trim() }
    ) {
        precondition(interval > .zero, "A trim interval must be positive (got \(interval)).")
        self.interval = interval
        self.wait = { duration in try await clock.sleep(for: duration) }
        self.trim = trim
    }

    /// The trims made so far, and the time they took.
    public var statistics: Statistics {
        self.totals.withLock { $0 }
    }

    /// Trims every ``interval`` until graceful shutdown or cancellation, then returns.
    public func run() async throws {
        let thread = NIOThreadPool(numberOfThreads: 1)
        thread.start()
        do {
            try await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    try await self.wait(self.interval)
                    try Task.checkCancellation()
                    try await thread.runIfActive { self.trimOnce() }
                }
            }
        } catch is CancellationError {
            // Stopped: the trims end with the service.
        }
        try await thread.shutdownGracefully()
    }

    private func trimOnce() {
        let clock = ContinuousClock()
        let started = clock.now
        self.trim()
        let took = clock.now - started
        self.totals.withLock { totals in
            totals.trims += 1
            totals.duration += took
        }
    }
}
