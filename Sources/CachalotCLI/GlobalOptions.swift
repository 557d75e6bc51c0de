import ArgumentParser
import AsyncHTTPClient
import Cachalot
import CachalotAsyncHTTPClient
import Foundation

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .customLong("cache-dir"), help: "The cache directory (default: see `cachalot --help`).")
    var cacheDirectory: String?

    @Option(
        name: .customLong("max-size"),
        help: "The most the cache may hold, such as 500MB or 2GiB; kept for the directory (default: 256 MiB)."
    )
    var maximumSize: ByteCount?

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
    /// else the disk tier's default.
    func openCache() throws -> DiskCache {
        let directory = self.resolvedCacheDirectory()
        let kept = ToolState.read(from: directory)?.maximumSize
        do {
            var configuration = DiskCache.Configuration()
            if let size = self.maximumSize?.bytes ?? kept { configuration.sizeLimit = size }
            let cache = try DiskCache(directory: directory, configuration: configuration)
            if let size = self.maximumSize?.bytes, size != kept {
                try ToolState.update(in: directory) { $0.maximumSize = size }
            }
            return cache
        } catch {
            throw Failure(
                .cacheUnusable,
                "cannot use the cache directory \(directory.path): \(Failure.describe(error)) "
                    + "(choose another with --cache-dir or CACHALOT_DIR)"
            )
        }
    }

    /// A loader over the cache, with the policy `--offline` or `policy` asks for.
    func makeLoader(
        disk: DiskCache,
        policy: CachePolicy = .useProtocolCachePolicy,
        timeout: Double,
        connectionsPerHost: Int? = nil
    ) throws -> ResourceLoader {
        var configuration = ResourceLoader.Configuration(policy: self.offline ? .returnCacheDataDontLoad : policy)
        // One run answers each URL about once: the disk is its cache, and a memory tier only work.
        configuration.memoryCostLimit = 0
        if let connectionsPerHost { configuration.maximumConnectionsPerHost = connectionsPerHost }
        return try ResourceLoader(
            configuration: configuration,
            transport: AsyncHTTPClientTransport(client: Self.client, timeout: .milliseconds(Int64(timeout * 1_000))),
            disk: disk
        )
    }

    /// The client for every request, made on first use and living as long as the process (so
    /// it needs no shutdown). A connection that fails is reported at once, not retried until
    /// the timeout: a refused port or an unknown host is an answer for a command-line tool.
    private static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// Ends a run's loading: waits until what was loaded is on disk, adds the run's counts to
    /// `cachalot.state`, and warns if something could not be stored (the answers stand).
    func finish(_ loader: ResourceLoader, disk: DiskCache) async {
        await loader.waitForBackgroundWork()
        let statistics = loader.statistics
        ToolState.record(statistics, in: disk.directory)
        if statistics.storageFailures > 0 && !self.quiet {
            Self.say(
                "cachalot: warning: \(statistics.storageFailures) answer(s) could not be stored in "
                    + "\(disk.directory.path) (free some disk space, or lower --max-size)"
            )
        }
    }

    /// Prints `value` as JSON on standard output: keys sorted, dates in ISO 8601.
    static func printJSON(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        FileHandle.standardOutput.write(try encoder.encode(value) + Data("\n".utf8))
    }

    /// Writes a line to standard error.
    static func say(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
