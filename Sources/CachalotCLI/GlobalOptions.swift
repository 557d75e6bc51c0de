import ArgumentParser
import Cachalot
import CachalotNIO
import CachalotPostgres
import Foundation
import Logging
import Synchronization

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .customLong("cache-dir"), help: "The cache directory (default: see `cachalot --help`).")
    var cacheDirectory: String?

    @Option(
        name: .customLong("max-size"),
        help: ArgumentHelp(
            "The most the cache may hold, such as 500MB or 2GiB; kept for the directory (default: 256 MiB).",
            discussion: "A response larger than 5 % of it is not stored, unless --max-entry-size says otherwise."
        )
    )
    var maximumSize: ByteCount?

    /// The smallest `--max-size`: 64 KiB, sixteen of the 4 KiB blocks that sizes are counted in.
    static let smallestSize = 64 << 10

    func validate() throws {
        if self.cacheDirectory?.isEmpty == true {
            throw ValidationError("--cache-dir is empty; name a directory, or leave the option out for the default.")
        }
        if let size = self.maximumSize?.bytes, size < Self.smallestSize {
            throw ValidationError("--max-size must be at least 64KiB; \(size) bytes could hold almost nothing.")
        }
    }

    @Flag(help: "Answer only from the cache; never use the network.")
    var offline = false

    @Flag(name: .shortAndLong, help: "Print nothing but the body and errors.")
    var quiet = false

    /// The cache directory: the option, else `CACHALOT_DIR`, else the platform's cache directory.
    func resolvedCacheDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let path = self.cacheDirectory ?? environment["CACHALOT_DIR"], !path.isEmpty {
            return URL(filePath: path)
        }
        #if os(macOS)
        return URL(filePath: NSHomeDirectory()).appending(path: "Library/Caches/cachalot")
        #else
        if let base = environment["XDG_CACHE_HOME"], base.hasPrefix("/") {
            return URL(filePath: base).appending(path: "cachalot")
        }
        return URL(filePath: environment["HOME"] ?? NSHomeDirectory()).appending(path: ".cache/cachalot")
        #endif
    }

    /// Opens the cache, or fails with a message that says what to do.
    ///
    /// The size limit is `--max-size`, which is then kept for the directory, else the one kept,
    /// else the disk tier's default. If the limit cannot be kept (a full disk), the command goes
    /// on with it after a warning.
    func openCache() throws -> DiskCache {
        let directory = self.resolvedCacheDirectory()
        do {
            return try self.makeCache(in: directory)
        } catch {
            throw self.unusable(directory, error)
        }
    }

    /// Opens the cache for a command that loads and hands the answer on (`get`): as
    /// ``openCache()`` does, except that a cache that cannot be made for want of space is no
    /// reason to withhold the answer. The command then goes on without it, after a warning.
    func openCacheForLoading() throws -> DiskCache? {
        let directory = self.resolvedCacheDirectory()
        do {
            return try self.makeCache(in: directory)
        } catch  where error.code == .outOfSpace {
            if !self.quiet {
                Self.say("cachalot: warning: \(self.unusable(directory, error).message); going on without it")
            }
            return nil
        } catch {
            throw self.unusable(directory, error)
        }
    }

    private func makeCache(in directory: URL) throws(CacheError) -> DiskCache {
        let kept = ToolState.read(from: directory)?.maximumSize
        var configuration = DiskCache.Configuration()
        if let size = self.maximumSize?.bytes ?? kept { configuration.sizeLimit = size }
        let cache = try DiskCache(directory: directory, configuration: configuration)
        if let size = self.maximumSize?.bytes, size != kept {
            do {
                try ToolState.update(in: directory) { $0.maximumSize = size }
            } catch {
                if !self.quiet {
                    Self.say(
                        "cachalot: warning: --max-size could not be kept for \(directory.path) (\(error)); "
                            + "it holds for this run"
                    )
                }
            }
        }
        return cache
    }

    private func unusable(_ directory: URL, _ error: any Error) -> Failure {
        Failure(
            .cacheUnusable,
            "cannot use the cache directory \(directory.path): \(Failure.describe(error)) "
                + "(choose another with --cache-dir or CACHALOT_DIR)"
        )
    }

    /// A loader over the cache, with the policy `--offline` or `policy` asks for. `timeout`
    /// bounds the wait for an answer's head, and the wait between two pieces of its body;
    /// `storage` gives the largest response stored.
    func makeLoader(
        disk: DiskCache?,
        shared: PostgresCache?,
        policy: CachePolicy = .useProtocolCachePolicy,
        timeout: Double,
        storage: StorageOptions,
        connectionsPerHost: Int? = nil
    ) throws -> ResourceLoader {
        var configuration = ResourceLoader.Configuration(policy: self.offline ? .returnCacheDataDontLoad : policy)
        // One run answers each URL about once: the disk is its cache, and a memory tier only work.
        configuration.memoryCostLimit = 0
        if let connectionsPerHost { configuration.maximumConnectionsPerHost = connectionsPerHost }
        configuration.maximumEntrySize = storage.maximumEntrySize?.bytes
        let timeout = Duration.milliseconds(Int64(timeout * 1_000))
        return try ResourceLoader(
            configuration: configuration,
            transport: Self.transport(timeout: timeout),
            disk: disk,
            shared: shared.map { [$0] } ?? []
        )
    }

    /// Refuses `--max-size` for a command that only reads the cache: opening with a new limit
    /// would evict to it and keep it, and a listing must not change the cache.
    func refuseSizeLimit(for command: String) throws {
        guard self.maximumSize == nil else {
            throw ValidationError(
                "--max-size changes the cache, and \(command) only reads it; give the limit to get, prefetch or trim."
            )
        }
    }

    /// `--timeout` must be a number of seconds from a millisecond to a week.
    static func validateTimeout(_ seconds: Double) throws {
        guard seconds.isFinite, seconds >= 0.001, seconds <= 604_800 else {
            throw ValidationError("--timeout must be a number of seconds from 0.001 to 604800 (a week).")
        }
    }

    /// The transport for every request, made on first use and living as long as the process
    /// (a process runs one command, with one `--timeout`): `timeout` bounds the connection, the
    /// wait for a response's head, and any silence in its body. No byte an origin sends can
    /// stop the tool; a connection that fails is reported at once.
    private static func transport(timeout: Duration) -> NIOTransport {
        Self.madeTransport.withLock { transport in
            if let transport { return transport }
            let made = NIOTransport(
                configuration: .init(connectTimeout: timeout, responseTimeout: timeout, idleTimeout: timeout)
            )
            transport = made
            return made
        }
    }

    private static let madeTransport = Mutex<NIOTransport?>(nil)

    /// Ends a run's loading: waits until what was loaded is stored (an interrupted run first
    /// drops what is still being read for the cache), adds the run's counts to
    /// `cachalot.state`, and returns how many answers could not be stored.
    @discardableResult
    func finish(_ loader: ResourceLoader, disk: DiskCache?) async -> Int {
        // Interrupted: a body still being read for the cache (which other loads could share) is
        // dropped with its reader, not read to its end and stored.
        if Task.isCancelled { loader.cancelBackgroundWork() }
        await loader.waitForBackgroundWork()
        let statistics = loader.statistics
        if let disk { ToolState.record(statistics, in: disk.directory) }
        return statistics.storageFailures
    }

    /// Warns that answers could not be stored in `disk` (the answers stand).
    func warnUnstored(_ count: Int, in disk: DiskCache?) {
        guard count > 0, !self.quiet, let disk else { return }
        Self.say(
            "cachalot: warning: \(count) answer(s) could not be stored in \(disk.directory.path) "
                + "(free some disk space, or lower --max-size)"
        )
    }

    /// Prints `value` as JSON on standard output: keys sorted, dates in ISO 8601.
    static func printJSON(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        try OutputFile.standardOutput(try encoder.encode(value) + Data("\n".utf8))
    }

    /// Writes a line to standard error.
    static func say(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
