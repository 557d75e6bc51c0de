import ArgumentParser
import CachalotServer
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `cachalot`: curl with a persistent cache that follows HTTP's caching rules.
@main
struct CachalotCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cachalot",
        abstract: "Fetch URLs through a persistent cache that follows HTTP's caching rules.",
        discussion: """
            The cache lives in $CACHALOT_DIR, else $XDG_CACHE_HOME/cachalot, else ~/.cache/cachalot \
            (~/Library/Caches/cachalot on macOS), unless --cache-dir names another.

            Exit status: 0 success; 1 the cache or the output could not be used, or answers could not \
            be stored; 2 the server answered with an error status (400 to 599) or a redirect that was \
            not followed; 3 the server could not be reached, the transfer broke, or the answer broke \
            HTTP; 4 offline and not in the cache; 5 the answer is not an image that can be decoded \
            (image); 64 the command line was wrong; 130 interrupted (Ctrl-C, SIGINT); 141 standard \
            output was closed by its reader; 143 terminated (SIGTERM).
            """,
        version: Self.version,
        subcommands: [
            Get.self, ImageCommand.self, PrefetchCommand.self, List.self, Stats.self, Purge.self, Trim.self, Clear.self,
            Serve.self,
            DatabaseCommand.self,
        ]
    )

    static func main() async {
        // A reader that goes away shows as EPIPE from a write, on which the command ends with
        // 141 after its bookkeeping (what was loaded is on disk, the counts are kept), rather
        // than as SIGPIPE, which would end it in the middle of a write. SwiftNIO ignores SIGPIPE
        // too, but only once it has opened a socket: an answer from the cache opens none.
        signal(SIGPIPE, SIG_IGN)
        // The proxy runs for days: fewer malloc arenas and a fixed mmap threshold keep what
        // evicted bodies freed from staying resident, and a trim threshold of 1 MiB spares the
        // page faults of fresh memory for the buffers of each large answer (docs/serve.md,
        // "Memory"). Set before other threads allocate; glibc's own variables (MALLOC_ARENA_MAX…)
        // win.
        if CommandLine.arguments.dropFirst().first == "serve" {
            MallocTuning.server.apply(environment: ProcessInfo.processInfo.environment)
        }
        let arguments: [String]
        do {
            arguments = try Serve.environment.arguments(
                Array(CommandLine.arguments.dropFirst()),
                environment: ProcessInfo.processInfo.environment
            )
        } catch {
            Self.exit(withError: error)
        }
        await Self.main(arguments)
    }
}
