import Cachalot
import Foundation
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// One database of a ``PostgresCache``: its connection pool, whether its schema is ready, and
/// whether it is reachable.
///
/// Every operation goes through ``perform(_:timeout:_:)``, which keeps the state:
/// - The schema is made ready (found, or created) before the first statement, on its connection
///   and within its time; a version this code does not know is an error of every operation from
///   then on, never a silent misuse.
/// - A database that fails to answer in time, or whose connection fails, is *down*: it is
///   logged once (a warning), counted, and left alone for ``PostgresCache/Configuration/retryInterval``,
///   during which its operations fail at once. The first operation after that tries it again;
///   when one started after the outage succeeds, it is *up* again, and that is logged too.
/// - An operation whose caller was cancelled says nothing of the database.
/// - An error the server reports about a statement is logged once per SQLSTATE until an
///   operation succeeds; it does not make the database down, unless it comes while the schema is
///   being made (then that is not tried again before the retry interval).
/// - A database that is down is tried again through a new connection pool, once the pool in use
///   has had the time to connect (the connect timeout, at least a second): postgres-nio's pool
///   waits longer between connection attempts the longer they fail (up to 60 s), so that after
///   a long outage it would come back up to a minute after the database does. A new pool
///   connects at once. The pool it replaces takes no new operation, and is closed once those
///   it runs have had their longest time (ten write timeouts, a purge's).
final class CacheDatabase: Sendable {
    let url: DatabaseURL
    /// The database's seed in rendezvous hashing, from its identity.
    let seed: UInt64
    /// The pool in use, and when it was made.
    private let pool: Mutex<(client: PostgresClient, made: ContinuousClock.Instant, retire: @Sendable () -> Void)>
    /// The pools to run, as they are made; ``run()`` runs each until it is retired.
    private let pools: AsyncStream<Pool>
    private let newPool: AsyncStream<Pool>.Continuation
    private let clientConfiguration: PostgresClient.Configuration
    private let configuration: PostgresCache.Configuration
    private let logger: Logger
    private let counters: PostgresCache.Counters
    private let eventLoop: any EventLoop
    private let state = Mutex(State())

    private struct State {
        var schema = Schema.unknown
        /// When a database that is down may be tried again; `nil` while it is up.
        var retryAt: ContinuousClock.Instant?
        /// When the operation that found the database down started; `nil` while it is up. Only
        /// an operation started after it brings the database back up.
        var downSince: ContinuousClock.Instant?
        /// The SQLSTATE of the last error the server reported, logged once.
        var lastServerError: String?
        var size = SizeEstimate()
    }

    private enum Schema {
        case unknown, ready
        case unusable(CacheError)
    }

    init(
        url: DatabaseURL,
        configuration: PostgresCache.Configuration,
        logger: Logger,
        counters: PostgresCache.Counters
    ) {
        self.url = url
        var seed: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in url.identity.utf8 { seed = (seed ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        self.seed = seed
        var client = PostgresClient.Configuration(
            host: url.host,
            port: url.port,
            username: url.user,
            password: url.password,
            database: url.database,
            tls: Self.tls(url.security)
        )
        client.options.maximumConnections = configuration.maximumConnections
        client.options.connectTimeout = max(configuration.writeTimeout, .seconds(1))
        self.clientConfiguration = client
        (self.pools, self.newPool) = AsyncStream.makeStream(of: Pool.self)
        let first = Pool(configuration: client, grace: configuration.writeTimeout * 10)
        self.pool = Mutex((first.client, .now, first.retire))
        self.newPool.yield(first)
        self.eventLoop = PostgresClient.defaultEventLoopGroup.any()
        self.configuration = configuration
        self.logger = logger
        self.counters = counters
    }

    /// TLS as libpq's `sslmode` means it: `prefer` and `require` encrypt without checking the
    /// server's certificate; `verify-full` checks it.
    private static func tls(_ security: DatabaseURL.Security) -> PostgresClient.Configuration.TLS {
        var unverified = TLSConfiguration.makeClientConfiguration()
        unverified.certificateVerification = .none
        switch security {
        case .disable: return .disable
        case .prefer: return .prefer(unverified)
        case .require: return .require(unverified)
        case .verifyFull: return .require(.makeClientConfiguration())
        }
    }

    /// How old a pool must be before a database that is down is tried through a new one: its
    /// connect timeout, so that a pool has had its first attempt.
    private var renewalAge: Duration { max(self.configuration.writeTimeout, .seconds(1)) }

    /// A connection pool, run until it is retired and the operations it ran have had their time.
    private struct Pool: Sendable {
        let client: PostgresClient
        let retire: @Sendable () -> Void
        private let retired: AsyncStream<Never>
        private let grace: Duration

        init(configuration: PostgresClient.Configuration, grace: Duration) {
            self.grace = grace
            // The pool's own messages (each failed connection attempt) are not passed on: an
            // outage is logged once, by the database.
            self.client = PostgresClient(
                configuration: configuration,
                backgroundLogger: Logger(label: "cachalot.postgres.pool", factory: { _ in SwiftLogNoOpLogHandler() })
            )
            let (retired, continuation) = AsyncStream.makeStream(of: Never.self)
            self.retired = retired
            self.retire = { continuation.finish() }
        }

        /// Runs the pool until the task is cancelled, or `grace` after it is retired; its
        /// connections are then closed.
        func run() async {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.client.run() }
                group.addTask {
                    for await _ in self.retired {}
                    try? await Task.sleep(for: self.grace)
                }
                await group.next()
                group.cancelAll()
            }
        }
    }

    /// Runs the connection pools, the one in use and those retired until they close, until the
    /// task is cancelled.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await pool in self.pools {
                group.addTask { await pool.run() }
            }
        }
    }

    /// The pool to use now: a new one if the database is down and the one in use is at least
    /// ``renewalAge`` old.
    private func client(isDown: Bool) -> PostgresClient {
        let now = ContinuousClock.now
        return self.pool.withLock { pool in
            guard isDown, now - pool.made >= self.renewalAge else { return pool.client }
            let fresh = Pool(configuration: self.clientConfiguration, grace: self.configuration.writeTimeout * 10)
            pool.retire()
            pool = (fresh.client, now, fresh.retire)
            self.newPool.yield(fresh)
            return fresh.client
        }
    }

    /// Runs `operation` on a connection, within `timeout`, once the schema is ready.
    ///
    /// - Throws: `CacheError.Code.unavailable` if the database is down, fails or does not
    ///   answer in time, or the caller was cancelled; `CacheError.Code.invalidConfiguration`
    ///   if its schema is of a version this code does not know.
    func perform<Result: Sendable>(
        _ what: String,
        timeout: Duration,
        _ operation: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws(CacheError) -> Result {
        let started = ContinuousClock.now
        let (schema, retryAt, isDown) = self.state.withLock { ($0.schema, $0.retryAt, $0.downSince != nil) }
        if case .unusable(let error) = schema { throw error }
        if let retryAt, started < retryAt {
            self.counters.failure()
            throw CacheError(.unavailable, "The shared cache at \(self.url) is down; \(what) was skipped.")
        }
        do {
            // The schema is made ready on the operation's connection, within its time.
            let needsSchema = if case .unknown = schema { true } else { false }
            let client = self.client(isDown: isDown)
            let result = try await Deadline.run(within: timeout, on: self.eventLoop) {
                try await client.withConnection { connection in
                    if needsSchema { try await self.prepare(on: connection) }
                    return try await operation(connection)
                }
            }
            self.succeeded(started: started)
            return result
        } catch let error as CacheError {
            throw error
        } catch {
            if Task.isCancelled {
                // The caller went away: nothing is known of the database.
                throw CacheError(.unavailable, "\(what) in the shared cache at \(self.url) was cancelled.")
            }
            throw self.failed(what, error, started: started)
        }
    }

    /// Finds or makes the schema on `connection`; throws, and keeps throwing from then on, if it
    /// is of a version this code does not know.
    private func prepare(on connection: PostgresConnection) async throws {
        let version = try await CacheTable.prepare(
            on: connection,
            isUnlogged: self.configuration.isUnlogged,
            logger: self.logger
        )
        guard version == CacheTable.version else {
            let error = CacheError(
                .invalidConfiguration,
                "The shared cache at \(self.url) has a schema of version \(version); this version of Cachalot "
                    + "reads and writes version \(CacheTable.version) only. Use a Cachalot that knows it, or "
                    + "remove the schema to start afresh: \(CacheTable.removal)."
            )
            self.state.withLock { $0.schema = .unusable(error) }
            self.logger.error("\(error.message)", metadata: ["database": "\(self.url)"])
            throw error
        }
        self.state.withLock { $0.schema = .ready }
    }

    /// Notes an operation started at `started` that succeeded: the database is up again, unless
    /// it went down after the operation started.
    private func succeeded(started: ContinuousClock.Instant) {
        let isBack = self.state.withLock { state in
            state.lastServerError = nil
            guard let since = state.downSince, started >= since else { return false }
            (state.retryAt, state.downSince) = (nil, nil)
            return true
        }
        if isBack {
            self.logger.info("The shared cache is reachable again", metadata: ["database": "\(self.url)"])
        }
    }

    /// Marks the database down after `error` of an operation started at `started`, logging it
    /// if it was up; returns the error to throw.
    private func failed(_ what: String, _ error: any Error, started: ContinuousClock.Instant) -> CacheError {
        let message = Self.describe(error)
        self.counters.failure()
        let failure = CacheError(.unavailable, "The shared cache at \(self.url) failed \(what): \(message)")
        // An error the server reports about a statement (a full disk, a missing permission) is
        // not an outage: the database answered. It is logged once, until something succeeds.
        if let error = error as? PSQLError, error.code == .server {
            let code = error.serverInfo?[.sqlState]
            let isNew = self.state.withLock { state in
                // A table is gone (the database was restored, or recreated): make the schema
                // again before the next statement.
                if code == "42P01" { state.schema = .unknown }
                // A schema that cannot be made is not tried again at once, by every load.
                if case .unknown = state.schema { state.retryAt = started + self.configuration.retryInterval }
                defer { state.lastServerError = code }
                return state.lastServerError != code
            }
            if isNew {
                self.logger.warning(
                    "The shared cache refused a statement; going on without it for such statements",
                    metadata: ["database": "\(self.url)", "error": "\(message)"]
                )
            }
            return failure
        }
        let wasUp = self.state.withLock { state in
            defer {
                state.retryAt = ContinuousClock.now + self.configuration.retryInterval
                state.downSince = state.downSince ?? started
            }
            return state.downSince == nil
        }
        if wasUp {
            self.counters.outage()
            self.logger.warning(
                "The shared cache is unavailable; going on without it until it answers again",
                metadata: ["database": "\(self.url)", "error": "\(message)"]
            )
        }
        return failure
    }

    /// What went wrong, with the server's message where it sent one (PSQLError's own
    /// description says nothing, to keep queries out of logs).
    static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] { return "\(error.code): \(message)" }
        return "\(error.code)\(error.underlying.map { " (\($0))" } ?? "")"
    }

    /// Counts a write of `size` bytes; returns whether a trim is due (see ``SizeEstimate``).
    /// Then one is under way until ``trimmed(toSize:seen:)``.
    func countWrite(size: Int64, maximumSize: Int64) -> Bool {
        self.state.withLock { $0.size.count(size, maximumSize: maximumSize) }
    }

    /// The bytes this process wrote since the last trim read the table's size: what a trim that
    /// reads it now sees of them.
    var unseenBytes: Int64 {
        self.state.withLock { $0.size.unseen }
    }

    /// Ends the trim under way: the table's size as it read it and left it, or `nil` if it read
    /// none (another process was trimming, or it failed); `seen` is ``unseenBytes`` as it was
    /// when the size was read.
    func trimmed(toSize size: Int64?, seen: Int64) {
        self.state.withLock { $0.size.trimmed(toSize: size, seen: seen) }
    }
}

/// What a process knows of a database's size between the trims that read it. A write does not
/// read it (summing `cachalot_usage` made a set about a tenth slower); a trim is due:
/// - once the size the last trim left plus what this process wrote since is over the limit:
///   what this process alone writes is trimmed as soon as it goes over;
/// - once this process has written a 64th of the limit since the last trim read the size, so
///   that what other processes wrote, and what was there when this one started, is seen: each
///   writer takes the table at most about a 64th of the limit over it (a value larger than
///   that makes its own write trim: a few statements, against the write's own milliseconds);
/// - every 64th write, for the age limit.
///
/// One trim at a time per process: writes that come while one is under way do not start
/// another.
struct SizeEstimate: Sendable {
    /// The table's size as the last trim left it; before the first, taken as empty.
    private(set) var trimmedSize: Int64 = 0
    /// The bytes this process wrote since the last trim read the size.
    private(set) var unseen: Int64 = 0
    /// Writes since the last trim was due.
    private(set) var writes = 0
    private(set) var isTrimming = false

    /// Counts a write of `size` bytes; returns whether a trim is due.
    mutating func count(_ size: Int64, maximumSize: Int64) -> Bool {
        self.writes += 1
        self.unseen = self.unseen.addingSaturated(size)
        guard
            !self.isTrimming,
            self.writes >= 64 || self.unseen > maximumSize / 64
                || self.trimmedSize.addingSaturated(self.unseen) > maximumSize
        else { return false }
        self.isTrimming = true
        self.writes = 0
        return true
    }

    /// Ends the trim under way: `size` is the size it read and left (`nil` if it read none),
    /// `seen` what ``unseen`` was when it read it (writes counted since are still unseen).
    mutating func trimmed(toSize size: Int64?, seen: Int64) {
        self.isTrimming = false
        if let size { self.trimmedSize = size }
        self.unseen = max(0, self.unseen.subtractingSaturated(seen))
    }
}
