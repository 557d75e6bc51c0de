import Foundation

/// Holds threads, not tasks, until it is opened: for work a test runs on threads of its own
/// (such as an `ImageWorkers` job), where blocking is allowed. Each thread that waits is
/// reported on ``arrivals`` first, so that a test knows the work has started.
public final class ThreadGate: @unchecked Sendable {
    private let condition = NSCondition()
    private var isOpen = false
    private let arrived: AsyncStream<Void>.Continuation
    /// One element for each thread that has come to ``wait()``.
    public let arrivals: AsyncStream<Void>

    /// Creates a closed gate.
    public init() {
        (self.arrivals, self.arrived) = AsyncStream.makeStream(of: Void.self)
    }

    /// Reports the calling thread on ``arrivals``, then blocks it until the gate is open.
    public func wait() {
        self.arrived.yield()
        self.condition.lock()
        while !self.isOpen { self.condition.wait() }
        self.condition.unlock()
    }

    /// Opens the gate for good, letting every waiting thread and every later one through.
    public func open() {
        self.condition.lock()
        self.isOpen = true
        self.condition.broadcast()
        self.condition.unlock()
    }
}
