import ArgumentParser
import Cachalot
import CachalotPostgres
import Foundation
import Logging

/// `--shared`: the options of the commands that load, or show, through the shared tier.
struct SharedOptions: ParsableArguments {
    @Option(
        name: .customLong("shared"),
        help: ArgumentHelp(
            "A PostgreSQL database that caches for several machines, below the disk, as postgres://user@host[:port]/db.",
            discussion: "Repeat it for several databases, among which keys are spread (default: CACHALOT_SHARED, "
                + "URLs separated by spaces)."
        )
    )
    var urls: [String] = []

    @Option(
        name: .customLong("shared-key"),
        help: ArgumentHelp(
            "A key every node shares, as hex (at least 32 digits, 16 bytes): rows carry an HMAC under it.",
            discussion: "A row whose HMAC does not verify is a miss (default: CACHALOT_SHARED_KEY, else none)."
        )
    )
    var key: String?

    /// The signing key: `--shared-key`, else `CACHALOT_SHARED_KEY`; `nil` for none.
    func signingKey(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Data? {
        guard let hex = self.key ?? environment["CACHALOT_SHARED_KEY"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            return nil
        }
        guard let key = HexKey.bytes(hex), key.count >= 16 else {
            throw ValidationError("The shared key must be hex digits, at least 32 of them (16 bytes).")
        }
        return key
    }

    /// The shared databases: `--shared`, else `CACHALOT_SHARED`; empty for none.
    func databases(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> [DatabaseURL] {
        let texts =
            self.urls.isEmpty
            ? (environment["CACHALOT_SHARED"] ?? "").split(separator: " ").map(String.init) : self.urls
        do {
            return try texts.map { text throws(CacheError) in try DatabaseURL(text) }
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The shared tier `--shared` or `CACHALOT_SHARED` names, with `writeTimeout` (which bounds
    /// connecting too), running around `body`, once it is
    /// connected and its schema is ready (or that failed: the outage is logged, once, on
    /// `logger`, and loads go on without it until it answers); `nil` for none. It stops when
    /// `body` returns.
    func withTier<Result>(
        logger: Logger,
        metrics: MetricsConfiguration? = nil,
        writeTimeout: Duration = .seconds(2),
        _ body: (PostgresCache?) async throws -> Result
    ) async throws -> Result {
        let databases = try self.databases()
        let signingKey = try self.signingKey()
        guard !databases.isEmpty else { return try await body(nil) }
        let shared: PostgresCache
        do {
            shared = try PostgresCache(
                configuration: .init(databases: databases, writeTimeout: writeTimeout, signingKey: signingKey),
                logger: logger,
                metrics: metrics
            )
        } catch {
            throw ValidationError(error.message)
        }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await shared.run() }
            defer { group.cancelAll() }
            try? await shared.prepare()
            return try await body(shared)
        }
    }

    /// ``withTier(logger:metrics:writeTimeout:_:)`` for a command: outages are logged on
    /// standard error, unless `quiet`. Connecting, and writing what the command loaded before it
    /// exits, may take a second at most: a database that is down delays a command by that, once.
    func withTier<Result>(quiet: Bool, _ body: (PostgresCache?) async throws -> Result) async throws -> Result {
        var logger = Logger(label: "cachalot") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = quiet ? .critical : .warning
        return try await self.withTier(logger: logger, writeTimeout: .seconds(1), body)
    }
}
