import NIOCore

/// A task executor that runs its jobs on one event loop: a connection's task runs on the loop
/// that reads its requests, so that a miss's request, its flight, the origin's connection and
/// the answer's writes cross no thread.
///
/// What such a task does must never wait: the loader moves what waits on a file elsewhere
/// (`withBlockingAllowed` in Cachalot), and a ``Responder`` that waits runs elsewhere
/// (``Responder/runsOnEventLoop``). A job enqueued from the loop itself costs no wake-up; NIO
/// runs it after the I/O events of the loop's current tick.
final class EventLoopExecutor: TaskExecutor {
    /// The loop the jobs run on.
    let loop: any EventLoop

    init(_ loop: any EventLoop) {
        self.loop = loop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
