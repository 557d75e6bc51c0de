import ArgumentParser
import Cachalot
import Foundation

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .customLong("cache-dir"), help: "The cache directory (default: see `cachalot --help`).")
    var cacheDirectory: String?

    @Option(
        name: .customLong("max-size"),
        help: "The most the cache may hold, such as 500MB or 2GiB (default: 256 MiB)."
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
    func openCache() throws -> DiskCache {
        let directory = self.resolvedCacheDirectory()
        do {
            var configuration = DiskCache.Configuration()
            if let size = self.maximumSize { configuration.sizeLimit = size.bytes }
            return try DiskCache(directory: directory, configuration: configuration)
        } catch {
            throw Failure(
                .cacheUnusable,
                "cannot use the cache directory \(directory.path): \(error.message) "
                    + "(choose another with --cache-dir or CACHALOT_DIR)"
            )
        }
    }
}
