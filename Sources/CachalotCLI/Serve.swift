import ArgumentParser
import Cachalot
import CachalotImages
import CachalotNIO
import CachalotPostgres
import CachalotServer
import CoreMetrics
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import UnixSignals

/// `cachalot serve`: a caching reverse proxy in front of one origin.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run a caching reverse proxy in front of an origin.",
        discussion: """
            Example:
              cachalot serve --origin http://127.0.0.1:8000 --listen 127.0.0.1:8080 \\
                --cache-dir /var/cache/cachalot --max-size 10GB --memory 512MB --admin 127.0.0.1:9090

            Every option can also come from an environment variable, which keeps secrets such as \
            --admin-token off the command line; an option given on the command line wins, and an \
            empty variable counts as unset. The variables: \(Self.environment.help). A flag's \
            variable is 1 or 0. Each request is logged on standard error (--access-log; -q: none, \
            unless --access-log is given, and other messages at warning and above only). \
            SIGTERM or SIGINT stops accepting, lets requests in flight finish, writes what is \
            pending to disk, and exits 0. See docs/serve.md.

            With --images, paths under /_image/ are resized images of the origin's, in the format \
            the client takes best: /_image/<signature>/<options>/<path on the origin>, such as \
            /_image/<signature>/w256,h256,fill/photos/cat.jpg, signed with HMAC-SHA256 under \
            --image-key (see docs/serve.md). Variants are kept in the cache directory.
            """
    )

    /// The variable of every option, read by `CachalotCommand.main` before parsing.
    static let environment = EnvironmentOptions(
        command: "serve",
        options: [
            .init("CACHALOT_ORIGIN", "--origin"),
            .init("CACHALOT_LISTEN", "--listen"),
            .init("CACHALOT_ADMIN", "--admin"),
            .init("CACHALOT_ADMIN_TOKEN", "--admin-token"),
            .init("CACHALOT_MEMORY", "--memory"),
            .init("CACHALOT_TRUSTED_PROXIES", "--trusted-proxy", .list(separator: ",")),
            .init("CACHALOT_KEY_HOST", "--key-host", .flag),
            .init("CACHALOT_STORE_SET_COOKIE", "--store-set-cookie", .flag),
            .init("CACHALOT_TIMEOUT", "--timeout"),
            .init("CACHALOT_CONNECT_TIMEOUT", "--connect-timeout"),
            .init("CACHALOT_IDLE_TIMEOUT", "--idle-timeout"),
            .init("CACHALOT_REQUEST_BODY_TIMEOUT", "--request-body-timeout"),
            .init("CACHALOT_MALLOC_TRIM_INTERVAL", "--malloc-trim-interval"),
            .init("CACHALOT_ACCESS_LOG", "--access-log"),
            .init("CACHALOT_IGNORE_TARGETED_CACHE_CONTROL", "--ignore-targeted-cache-control", .flag),
            .init("CACHALOT_STALE_IF_UNREACHABLE", "--stale-if-unreachable", .flag),
            .init("CACHALOT_IMAGES", "--images", .flag),
            .init("CACHALOT_IMAGE_KEY", "--image-key"),
            .init("CACHALOT_UNSIGNED_IMAGES", "--unsigned-images", .flag),
            .init("CACHALOT_IMAGE_MAX_SIZE", "--image-max-size"),
            .init("CACHALOT_IMAGE_MAX_PIXELS", "--image-max-pixels"),
            .init("CACHALOT_IMAGE_THREADS", "--image-threads"),
            .init("CACHALOT_IMAGE_QUEUE", "--image-queue"),
            .init("CACHALOT_DIR", "--cache-dir"),
            .init("CACHALOT_MAX_SIZE", "--max-size"),
            .init("CACHALOT_MAX_ENTRY_SIZE", "--max-entry-size"),
            .init("CACHALOT_OFFLINE", "--offline", .flag),
            .init("CACHALOT_QUIET", "--quiet", .flag),
            .init("CACHALOT_SHARED", "--shared", .list(separator: " ")),
            .init("CACHALOT_SHARED_KEY", "--shared-key"),
        ]
    )

    @OptionGroup var options: GlobalOptions
    @OptionGroup var storage: StorageOptions
    @OptionGroup var shared: SharedOptions

    @Option(help: "The origin to forward to, as http://host[:port][/base].")
    var origin: String?

    @Option(help: "Where to listen, as host:port (default: 127.0.0.1:8080).")
    var listen: String?

    @Option(help: "Where the admin listener (health, purge) listens, as host:port (default: none).")
    var admin: String?

    @Option(name: .customLong("admin-token"), help: "The bearer token the admin listener requires.")
    var adminToken: String?

    @Option(help: "The memory tier's size, such as 512MB (default: 512 MB; 0 for none).")
    var memory: String?

    @Option(
        name: .customLong("trusted-proxy"),
        help:
            "The IP address of a proxy in front whose Forwarded, X-Forwarded-* and override fields are kept; repeat for more."
    )
    var trustedProxies: [String] = []

    @Flag(
        name: .customLong("key-host"),
        help: "Key the cache by the Host clients ask for, and pass it on to the origin (default: neither)."
    )
    var keysHost = false

    @Flag(
        name: .customLong("store-set-cookie"),
        help: "Store responses that carry Set-Cookie (default: not stored, as nginx and Varnish do)."
    )
    var storesSetCookie = false

    @Option(help: "Seconds to wait for the whole head of the origin's answer (default: 30).")
    var timeout: Double = 30

    @Option(name: .customLong("connect-timeout"), help: "Seconds to wait for a connection to the origin (default: 10).")
    var connectTimeout: Double = 10

    @Option(
        name: .customLong("idle-timeout"),
        help: "Seconds the origin may send nothing while more of its body is owed (default: --timeout's)."
    )
    var idleTimeout: Double?

    @Option(
        name: .customLong("request-body-timeout"),
        help: ArgumentHelp(
            "Seconds a client may take between two pieces of a request body before it gets 408.",
            valueName: "seconds"
        )
    )
    var requestBodyTimeout: Double = 60

    @Option(
        name: .customLong("malloc-trim-interval"),
        help: ArgumentHelp(
            "Seconds between two returns of malloc's free memory to the system (malloc_trim); 0 for none.",
            valueName: "seconds"
        )
    )
    var mallocTrimInterval: Double = 10

    @Option(
        name: .customLong("access-log"),
        help: ArgumentHelp(
            "The access log's format on standard error: text, json or off (default: text; off with -q).",
            valueName: "format"
        )
    )
    var accessLog: String?

    @Flag(
        name: .customLong("ignore-targeted-cache-control"),
        help: "Ignore Cachalot-Cache-Control and CDN-Cache-Control (RFC 9213), obeying Cache-Control alone."
    )
    var ignoresTargetedFields = false

    @Flag(
        name: .customLong("stale-if-unreachable"),
        help: "When the origin cannot be reached, answer with a stale stored response unless it forbids it."
    )
    var servesStaleIfUnreachable = false

    @Flag(name: .customLong("images"), help: "Answer /_image/… with resized images of the origin's (see below).")
    var servesImages = false

    @Option(
        name: .customLong("image-key"),
        help: "The key that signs image paths, as hex (at least 32 digits, 16 bytes); or CACHALOT_IMAGE_KEY."
    )
    var imageKey: String?

    @Flag(
        name: .customLong("unsigned-images"),
        help:
            "Serve image paths without a signature ('unsafe' in its place): anyone may make the proxy resize any image."
    )
    var unsignedImages = false

    @Option(name: .customLong("image-max-size"), help: "The largest original the image endpoint reads (default: 32MB).")
    var imageMaximumSize: ByteCount?

    @Option(name: .customLong("image-max-pixels"), help: "The most pixels an original may declare (default: 50000000).")
    var imageMaximumPixels: Int?

    @Option(
        name: .customLong("image-threads"),
        help: "Threads that decode, resize and encode images (default: the cores but one, at least 1)."
    )
    var imageThreads: Int?

    @Option(
        name: .customLong("image-queue"),
        help: "The most images waiting for a thread; more are answered 503 with Retry-After (default: 16)."
    )
    var imageQueue: Int?

    /// The image endpoint the options ask for, keeping its variants in `disk`; `nil` without `--images`.
    private func imageEndpoint(variants disk: DiskCache) throws -> ImageEndpoint? {
        guard self.servesImages else {
            guard self.imageKey == nil, !self.unsignedImages else {
                throw ValidationError("--image-key and --unsigned-images go with --images.")
            }
            return nil
        }
        let signing: ImageEndpoint.Signing
        switch (self.imageKey, self.unsignedImages) {
        case (nil, false):
            throw ValidationError(
                "--images needs --image-key (or CACHALOT_IMAGE_KEY), or --unsigned-images to sign nothing."
            )
        case (_?, true):
            throw ValidationError("Give --image-key or --unsigned-images, not both.")
        case (nil, true):
            signing = .disabled
        case (let hex?, false):
            guard let key = HexKey.bytes(hex), key.count >= 16 else {
                throw ValidationError("The image key must be hex digits, at least 32 of them (16 bytes).")
            }
            signing = .key(key)
        }
        guard (self.imageMaximumPixels ?? 1) > 0 else { throw ValidationError("--image-max-pixels must be positive.") }
        guard (self.imageThreads ?? 1) > 0 else { throw ValidationError("--image-threads must be positive.") }
        guard (self.imageQueue ?? 0) >= 0 else { throw ValidationError("--image-queue cannot be negative.") }
        return ImageEndpoint(
            signing: signing,
            variants: disk,
            maximumSourceSize: self.imageMaximumSize?.bytes ?? 32_000_000,
            maximumPixelCount: self.imageMaximumPixels ?? 50_000_000,
            threads: self.imageThreads ?? ImageWorkers.defaultThreadCount,
            queueLimit: self.imageQueue ?? 16
        )
    }

    /// The access log that `--access-log` (`name`) and `-q` (`quiet`) ask for: text unless told
    /// otherwise, none with `-q` unless `--access-log` (or its variable) names a format.
    static func accessLog(named name: String?, quiet: Bool) throws -> AccessLog? {
        switch name {
        case nil:
            return quiet ? nil : AccessLog(format: .text)
        case "off"?:
            return nil
        case let name?:
            guard let format = AccessLog.Format(name) else {
                throw ValidationError(
                    "--access-log (or CACHALOT_ACCESS_LOG) must be text, json or off; \(name) is not."
                )
            }
            return AccessLog(format: format)
        }
    }

    func run() async throws {
        for timeout in [self.timeout, self.connectTimeout, self.idleTimeout ?? self.timeout] {
            try GlobalOptions.validateTimeout(timeout)
        }
        guard self.requestBodyTimeout.isFinite, self.requestBodyTimeout >= 0.001, self.requestBodyTimeout <= 604_800
        else {
            throw ValidationError("--request-body-timeout must be a number of seconds from 0.001 to 604800 (a week).")
        }
        guard self.mallocTrimInterval == 0 || (self.mallocTrimInterval >= 0.1 && self.mallocTrimInterval <= 86_400)
        else {
            throw ValidationError(
                "--malloc-trim-interval (or CACHALOT_MALLOC_TRIM_INTERVAL) must be 0 or seconds from 0.1 to 86400."
            )
        }
        let accessLog = try Self.accessLog(named: self.accessLog, quiet: self.options.quiet)
        guard !self.options.offline else {
            throw ValidationError("--offline is for get, prefetch and image: serve forwards every miss to the origin.")
        }
        guard let originText = self.origin, let origin = URL(string: originText) else {
            throw ValidationError("Name the origin with --origin http://host:port or CACHALOT_ORIGIN.")
        }
        let listenText = self.listen ?? "127.0.0.1:8080"
        guard let listen = CacheServer.Address(listenText) else {
            throw ValidationError("--listen must be host:port, such as 127.0.0.1:8080; \(listenText) is not.")
        }
        var adminAddress: CacheServer.Address?
        if let adminText = self.admin, !adminText.isEmpty {
            guard let address = CacheServer.Address(adminText) else {
                throw ValidationError("--admin must be host:port, such as 127.0.0.1:9090; \(adminText) is not.")
            }
            adminAddress = address
        }
        let memoryText = self.memory ?? "512MB"
        guard let memory = memoryText == "0" ? ByteCount(bytes: 0) : ByteCount(argument: memoryText) else {
            throw ValidationError(
                "--memory (or CACHALOT_MEMORY) must be a size such as 512MB, or 0; \(memoryText) is not."
            )
        }
        let trusted = Set(self.trustedProxies)

        var logger = Logger(label: "cachalot.serve") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = self.options.quiet ? .warning : .info
        let disk = try self.options.openCache()
        // Variants live beside the responses: the directory's size limit covers both.
        let images = try self.imageEndpoint(variants: disk)
        let targets = self.ignoresTargetedFields ? [] : CacheServer.targetedFields
        var loaderConfiguration = ResourceLoader.Configuration(
            rules: CacheRules(
                isShared: true,
                targetedFields: targets,
                isStaleIfUnreachableEnabled: self.servesStaleIfUnreachable,
                storesResponsesWithSetCookie: self.storesSetCookie
            )
        )
        let (metrics, metricsText) = Self.prometheus(disk: disk)
        loaderConfiguration.metrics = MetricsConfiguration(label: "cachalot_loader", factory: metrics.factory)
        loaderConfiguration.maximumRedirects = 0
        loaderConfiguration.memoryCostLimit = memory.bytes
        loaderConfiguration.maximumEntrySize = self.storage.maximumEntrySize?.bytes
        // One origin, many clients: the loader's per-host limit (6, for apps) would queue them.
        loaderConfiguration.maximumConnectionsPerHost = 256
        // A body over this is written to its file as it arrives, and a slow client then holds
        // no more than a window of it in memory (see docs/serve.md, "Memory").
        loaderConfiguration.streamingThreshold = 2 << 20
        // What all bodies in flight hold in memory together, past which the stored ones go to
        // their files at once (see docs/serve.md, "Memory").
        loaderConfiguration.inFlightBodyLimit = 64 << 20
        let transport = NIOTransport(
            configuration: .init(
                connectTimeout: .milliseconds(Int64(self.connectTimeout * 1_000)),
                responseTimeout: .milliseconds(Int64(self.timeout * 1_000)),
                idleTimeout: .milliseconds(Int64((self.idleTimeout ?? self.timeout) * 1_000))
            )
        )
        defer { transport.shutDown() }
        var limits = CacheServer.Limits()
        limits.requestBodyTimeout = .milliseconds(Int64(self.requestBodyTimeout * 1_000))
        let sharedMetrics = MetricsConfiguration(label: "cachalot_shared", factory: metrics.factory)
        // The shared tier runs for as long as the server, and stops after its last write.
        try await self.shared.withTier(logger: logger, metrics: sharedMetrics) { sharedTier in
            let loader = try ResourceLoader(
                configuration: loaderConfiguration,
                transport: transport,
                disk: disk,
                shared: sharedTier.map { [$0] } ?? [],
                logger: logger
            )
            // glibc keeps what bodies freed inside its heaps; this gives it back (docs/serve.md, "Memory").
            let trimmer =
                self.mallocTrimInterval == 0
                ? nil : MallocTrimmer(interval: .milliseconds(Int64(self.mallocTrimInterval * 1_000)))
            let server: CacheServer
            do {
                server = try CacheServer(
                    configuration: .init(
                        origin: origin,
                        listen: listen,
                        admin: adminAddress,
                        adminToken: self.adminToken,
                        trustedProxies: trusted,
                        keysHost: self.keysHost,
                        limits: limits,
                        metrics: metrics,
                        metricsText: { metricsText(loader, trimmer) },
                        images: images,
                        accessLog: accessLog
                    ),
                    loader: loader,
                    logger: logger
                )
            } catch {
                throw ValidationError("\(error)")
            }
            let group = ServiceGroup(
                configuration: .init(
                    services: [.init(service: server)] + (trimmer.map { [.init(service: $0)] } ?? []),
                    gracefulShutdownSignals: [.sigterm, .sigint],
                    logger: logger
                )
            )
            do {
                try await group.run()
            } catch {
                throw Failure(.cacheUnusable, "the proxy stopped: \(error)")
            }
        }
    }

    /// Metrics in a Prometheus registry of the command's own, and the text of `/metrics` for a
    /// loader: what the proxy and the loader count, with gauges read at each scrape: the disk
    /// tier's size and entries, the memory tier's cost and entries, and what glibc's malloc holds
    /// (see docs/serve.md, "Memory").
    private static func prometheus(
        disk: DiskCache
    ) -> (MetricsConfiguration, @Sendable (ResourceLoader, MallocTrimmer?) -> String) {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Prometheus names allow letters, digits, _ and :; swift-metrics labels may hold more.
        factory.nameAndLabelSanitizer = { label, dimensions in
            func sanitized(_ name: String) -> String {
                String(name.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") ? $0 : "_" })
            }
            return (sanitized(label), dimensions.map { (sanitized($0.0), $0.1) })
        }
        let storedBytes = Gauge(label: "cachalot_disk_stored_bytes", factory: factory)
        let storedEntries = Gauge(label: "cachalot_disk_entries", factory: factory)
        let memoryCost = Gauge(label: "cachalot_memory_tier_cost_bytes", factory: factory)
        let memoryEntries = Gauge(label: "cachalot_memory_tier_entries", factory: factory)
        let mallocInUse = Gauge(label: "cachalot_malloc_in_use_bytes", factory: factory)
        let mallocMapped = Gauge(label: "cachalot_malloc_mapped_bytes", factory: factory)
        let mallocArena = Gauge(label: "cachalot_malloc_arena_bytes", factory: factory)
        let mallocFree = Gauge(label: "cachalot_malloc_free_bytes", factory: factory)
        let trims = Gauge(label: "cachalot_malloc_trims", factory: factory)
        let trimSeconds = Gauge(label: "cachalot_malloc_trim_seconds", factory: factory)
        return (
            MetricsConfiguration(label: "cachalot_proxy", factory: factory),
            { loader, trimmer in
                if let size = try? disk.totalSize { storedBytes.record(size) }
                if let count = try? disk.count { storedEntries.record(count) }
                if let memory = loader.memoryTierStatistics {
                    memoryCost.record(memory.totalCost)
                    memoryEntries.record(memory.count)
                }
                if let malloc = MallocStatistics.current() {
                    mallocInUse.record(malloc.inUseBytes)
                    mallocMapped.record(malloc.mappedBytes)
                    mallocArena.record(malloc.arenaBytes)
                    mallocFree.record(malloc.freeBytes)
                }
                if let trimmed = trimmer?.statistics {
                    trims.record(trimmed.trims)
                    trimSeconds.record(trimmed.duration / .seconds(1))
                }
                return registry.emitToString()
            }
        )
    }
}
