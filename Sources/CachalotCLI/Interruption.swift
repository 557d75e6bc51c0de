import ArgumentParser
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ctrl-C for commands that download.
enum Interruption {
    /// The exit status after an interruption by `signal`, as shells report it: 128 + the
    /// signal's number, so 130 for SIGINT (Ctrl-C) and 143 for SIGTERM.
    static func status(after signal: Int32) -> Int32 { 128 + signal }

    /// Runs `work`; an interrupt (SIGINT, Ctrl-C) or SIGTERM cancels it, and the command ends
    /// with status 130 or 143 as soon as the work has stopped, also if it finished meanwhile.
    ///
    /// Cancelling is what keeps the cache whole: a cancelled load abandons its streaming write,
    /// whose temporary file is removed, and stores nothing. A second interrupt ends the process
    /// at once.
    static func cancelling(quiet: Bool, _ work: @escaping @Sendable () async throws -> Void) async throws {
        let task = Task { try await work() }
        // The signal that interrupted, or 0.
        let interrupted = Atomic<Int32>(0)
        let sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                signal(number, SIG_DFL)
                guard interrupted.compareExchange(expected: 0, desired: number, ordering: .relaxed).exchanged
                else { return }
                task.cancel()
            }
            source.resume()
            return source
        }
        defer { for source in sources { source.cancel() } }
        do {
            try await task.value
        } catch {
            let received = interrupted.load(ordering: .relaxed)
            guard received != 0 else { throw error }
            if !quiet { GlobalOptions.say("cachalot: interrupted; nothing partial was kept") }
            throw ExitCode(Self.status(after: received))
        }
        // The work finished as the signal came: it is whole, but the command was still stopped.
        let received = interrupted.load(ordering: .relaxed)
        if received != 0 { throw ExitCode(Self.status(after: received)) }
    }
}
