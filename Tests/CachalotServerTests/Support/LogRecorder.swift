import Logging
import NIOPosix
import Synchronization

/// Keeps what a logger is told, and lets a test wait for a message: how a test learns that the
/// server did something it shows nowhere else (closed a connection on its own, say).
final class LogRecorder: Sendable {
    private struct Waiter {
        let id: Int
        let text: String
        let continuation: CheckedContinuation<Void, Never>
    }

    private let state = Mutex<(messages: [String], waiters: [Waiter], nextID: Int)>(([], [], 0))
    /// The messages logged by a thread of an event loop, which must never wait on a log's output.
    private let onEventLoop = Mutex<[String]>([])

    /// A logger that records into this recorder.
    func logger(label: String = "test") -> Logger {
        Logger(label: label) { _ in Handler(recorder: self) }
    }

    /// Waits until a message containing `text` has been logged, or the task is cancelled (a
    /// test's time limit, say): a wait never outlives its test.
    func wait(for text: String) async {
        let id = self.state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let isReady = self.state.withLock { state in
                    guard !Task.isCancelled, !state.messages.contains(where: { $0.contains(text) }) else { return true }
                    state.waiters.append(Waiter(id: id, text: text, continuation: continuation))
                    return false
                }
                if isReady { continuation.resume() }
            }
        } onCancel: {
            let waiter = self.state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume()
        }
    }

    /// The messages containing `text` that were logged on an event loop's thread.
    func loggedOnEventLoop(_ text: String) -> [String] {
        self.onEventLoop.withLock { $0.filter { $0.contains(text) } }
    }

    fileprivate func record(_ message: String) {
        if MultiThreadedEventLoopGroup.currentEventLoop != nil { self.onEventLoop.withLock { $0.append(message) } }
        let ready = self.state.withLock { state in
            state.messages.append(message)
            var ready: [CheckedContinuation<Void, Never>] = []
            state.waiters.removeAll { waiter in
                guard message.contains(waiter.text) else { return false }
                ready.append(waiter.continuation)
                return true
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { self.metadata[key] }
            set { self.metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            self.recorder.record(event.message.description)
        }
    }
}
