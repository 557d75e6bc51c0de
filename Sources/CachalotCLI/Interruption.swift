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
    /// The exit status after an interruption: 128 + SIGINT, as shells report it.
    static let status: Int32 = 130

    /// Runs `work`; an interrupt (SIGINT, Ctrl-C) or SIGTERM cancels it, and the command ends
    /// with status 130 as soon as the work has stopped.
    ///
    /// Cancelling is what keeps the cache whole: a cancelled load abandons its streaming write,
    /// whose temporary file is removed, and stores nothing. A second interrupt ends the process
    /// at once.
    static func cancelling(quiet: Bool, _ work: @escaping @Sendable () async throws -> Void) async throws {
        let task = Task { try await work() }
        let interrupted = Atomic<Bool>(false)
        let sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                signal(number, SIG_DFL)
                guard !interrupted.exchange(true, ordering: .relaxed) else { return }
                task.cancel()
            }
            source.resume()
            return source
        }
        defer { for source in sources { source.cancel() } }
        do {
            try await task.value
        } catch {
            guard interrupted.load(ordering: .relaxed) else { throw error }
            if !quiet { GlobalOptions.say("cachalot: interrupted; nothing partial was kept") }
            throw ExitCode(Self.status)
        }
    }
}
