import Logging
import Synchronization

/// The server's log for code on an event loop, which must never wait on a log's output: a
/// message is only handed over there, and ``run()``, a task of the server's, writes it.
///
/// At most ``capacity`` messages wait; more are dropped and counted, and the count is logged
/// with the next message written.
final class LoopLog: Sendable {
    private struct Message: Sendable {
        var level: Logger.Level
        var text: Logger.Message
        var metadata: Logger.Metadata
    }

    private let logger: Logger
    private let messages: AsyncStream<Message>
    private let continuation: AsyncStream<Message>.Continuation
    private let dropped = Atomic(0)

    /// The messages that may wait to be written.
    static let capacity = 1_024

    /// - Parameter logger: Where ``run()`` writes the messages.
    init(_ logger: Logger) {
        self.logger = logger
        (self.messages, self.continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingOldest(Self.capacity))
    }

    /// Hands a message over to be written; never waits. Nothing is made of a message whose
    /// level the logger does not write.
    func log(_ level: Logger.Level, _ text: @autoclosure () -> Logger.Message, metadata: Logger.Metadata = [:]) {
        guard level >= self.logger.logLevel else { return }
        if case .dropped = self.continuation.yield(Message(level: level, text: text(), metadata: metadata)) {
            self.dropped.add(1, ordering: .relaxed)
        }
    }

    /// Writes the messages as they come, until ``finish()`` and the last of them, or cancellation.
    func run() async {
        for await message in self.messages {
            self.logger.log(level: message.level, message.text, metadata: message.metadata)
            let dropped = self.dropped.exchange(0, ordering: .relaxed)
            if dropped > 0 {
                self.logger.warning(
                    "Dropped log messages: the log did not keep up",
                    metadata: ["messages": "\(dropped)"]
                )
            }
        }
    }

    /// Ends ``run()`` once the messages handed over so far are written; later ones are dropped.
    func finish() {
        self.continuation.finish()
    }
}
