import Logging
import NIOPosix
import Synchronization

/// Keeps what a logger is told, and lets a test wait for a message: how a test learns that the
/// server did something it shows nowhere else (closed a connection on its own, say).
final class LogRecorder: Sendable {
    private let state = Mutex<(messages: [String], waiters: [(String, CheckedContinuation<Void, Never>)])>(([], []))
    /// The messages logged by a thread of an event loop, which must never wait on a log's output.
    private let onEventLoop = Mutex<[String]>([])

    /// A logger that records into this recorder.
    func logger(label: String = "test") -> Logger {
        Logger(label: label) { _ in Handler(recorder: self) }
    }

    /// Waits until a message containing `text` has been logged.
    func wait(for text: String) async {
        await withCheckedContinuation { continuation in
            let isLogged = self.state.withLock { state in
                guard !state.messages.contains(where: { $0.contains(text) }) else { return true }
                state.waiters.append((text, continuation))
                return false
            }
            if isLogged { continuation.resume() }
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
            state.waiters.removeAll { text, continuation in
                guard message.contains(text) else { return false }
                ready.append(continuation)
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
