import Logging
import Testing

/// The test support's log recorder: its waits end when a message comes, or when their task is
/// cancelled, so that a test past its time limit leaves no wait behind.
@Suite("LogRecorder", .timeLimit(.minutes(1)))
struct LogRecorderTests {
    @Test("a wait ends when the message is logged, before or after it begins")
    func endsOnMessage() async {
        let recorder = LogRecorder()
        let logger = recorder.logger()
        logger.info("first")
        await recorder.wait(for: "first")
        let waiting = Task { await recorder.wait(for: "second") }
        logger.info("the second message")
        await waiting.value
    }

    @Test("a wait for a message never logged ends when its task is cancelled, before or while it waits")
    func endsOnCancellation() async {
        let recorder = LogRecorder()
        let waiting = Task { await recorder.wait(for: "never") }
        waiting.cancel()
        await waiting.value
        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await recorder.wait(for: "never")
        }
        await cancelledFirst.value
    }
}
