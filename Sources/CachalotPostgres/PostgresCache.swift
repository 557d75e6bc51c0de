import Cachalot
import Crypto
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// A store of bytes and metadata in PostgreSQL, shared by every machine that names the same
/// databases: the shared tier of a fleet's `ResourceLoader`s, below their memory and disk.
///
/// ```swift
/// let shared = try PostgresCache(
///     configuration: .init(databases: [DatabaseURL("postgres://cachalot@db.internal/cache")])
/// )
/// let loader = try ResourceLoader(
///     transport: AsyncHTTPClientTransport(),
///     disk: DiskCache(directory: cacheDirectory),
///     shared: [shared]
/// )
/// try await withThrowingDiscardingTaskGroup { group in
///     group.addTask { try await shared.run() }  // its connection pools; or put it in a ServiceGroup
///     let resource = try await loader.load(url)  // memory, disk, PostgreSQL, then the origin
/// }
/// ```
///
/// - Each key lives in one of the configured databases, chosen by rendezvous hashing of its
///   digest: adding a database moves about 1/*n* of the keys (they are misses once, then
///   written where they now belong).
/// - The schema is created on first use if it is absent (``prepare()`` does it at once). A
///   schema of another version is a clear error (`CacheError.Code.invalidConfiguration`).
/// - A row is read whole and checked: its key is compared with the key asked for, and its
///   CRC-32C with its bytes and metadata. A row that fails, or is older than
///   ``Configuration/maximumAge``, reads as a miss and is removed. With
///   ``Configuration/signingKey``, a row must also carry a valid HMAC-SHA256 under it.
/// - Each database keeps within ``Configuration/maximumSize`` by removing its oldest rows
///   (first in, first out) in batches of ``Configuration/trimBatchSize``, trimmed by a write that
///   takes it over. The size is kept by a trigger, never counted by scanning the table, and
///   read by trims only: a process knows what it wrote since its last trim, and reads the size
///   again after every 64th of ``Configuration/maximumSize`` it writes, so that with other
///   writers a database goes over its size by at most about a 64th of it per writer.
/// - A database that is down, slow or full is never worse than none: reads that take longer
///   than ``Configuration/readTimeout`` are misses, a database that fails is left alone for
///   ``Configuration/retryInterval`` (its reads are misses at once), the outage is logged once
///   and counted, and the database is used again when it answers. Errors are thrown as
///   `CacheError.Code.unavailable`, which a `ResourceLoader` reads as a miss.
///
/// The pools connect only while ``run()`` runs: run it for as long as the cache is used.
public final class PostgresCache: AsyncDataCaching, Service {
    /// The configuration the cache was made with.
    public let configuration: Configuration
    private let databases: [CacheDatabase]
    private let now: @Sendable () -> Date
    private let counters: Counters
    private let logger: Logger
    /// The fleet's signing key, if it has one.
    private let signingKey: SymmetricKey?
    /// Whether a row that did not verify has been logged: once a process.
    private let loggedUnverified = Mutex(false)

    /// Makes a cache on the databases of `configuration`. Nothing connects until ``run()``.
    ///
    /// - Parameters:
    ///   - configuration: The databases and limits; see ``Configuration``.
    ///   - now: The wall clock that dates entries and ages them. Default: the system's.
    ///   - logger: Where outages are logged (once each, as a warning) and recoveries (info).
    ///     Default: nowhere.
    ///   - metrics: Where the counters of ``statistics`` are reported too. Default: nowhere.
    /// - Throws: `CacheError.Code.invalidConfiguration` if the configuration is invalid.
    public init(
        configuration: Configuration,
        now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "cachalot.postgres", factory: { _ in SwiftLogNoOpLogHandler() }),
        metrics: MetricsConfiguration? = nil
    ) throws(CacheError) {
        try configuration.validate()
        self.configuration = configuration
        self.now = now
        let counters = Counters(metrics)
        self.counters = counters
        self.databases = configuration.databases.map {
            CacheDatabase(url: $0, configuration: configuration, logger: logger, counters: counters)
        }
        self.logger = logger
        self.signingKey = configuration.signingKey.map { SymmetricKey(data: $0) }
        for url in configuration.databases where !url.isLoopback {
            switch url.security {
            case .prefer, .require:
                logger.warning(
                    """
                    The shared cache's connection is encrypted, but the server's certificate is not checked \
                    (sslmode=\(url.security.rawValue)): whoever sits between can read and change its rows. Use \
                    sslmode=verify-full, or a signing key (--shared-key).
                    """,
                    metadata: ["database": "\(url)"]
                )
            case .disable:
                logger.warning(
                    """
                    The shared cache's connection is not encrypted (sslmode=disable): whoever sits between can \
                    read and change its rows. Use sslmode=verify-full, or a signing key (--shared-key).
                    """,
                    metadata: ["database": "\(url)"]
                )
            case .verifyFull:
                break
            }
        }
    }

    /// Runs the databases' connection pools until the task is cancelled (or, in a
    /// `ServiceGroup`, until graceful shutdown). It connects to each database at once and makes
    /// its schema ready, so that the first loads find a connection open.
    ///
    /// - Throws: Nothing in practice: a database that cannot be reached is logged and counted as
    ///   an outage, and ``run()`` goes on; the signature is `Service`'s.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                for database in self.databases {
                    group.addTask { await database.run() }
                    group.addTask {
                        _ = try? await database.perform("connecting", timeout: self.writeTimeout) { _ in }
                    }
                }
            }
        }
    }

    /// Makes sure every database has the schema, creating it where it is absent.
    ///
    /// - Throws: `CacheError.Code.unavailable` if a database cannot be reached;
    ///   `CacheError.Code.invalidConfiguration` if one has a schema of another version.
    public func prepare() async throws(CacheError) {
        for database in self.databases {
            try await database.perform("preparing the schema", timeout: self.configuration.writeTimeout) { _ in }
        }
    }

    /// What the cache has done since it was made.
    public var statistics: Statistics {
        self.counters.snapshot
    }

    // MARK: - AsyncDataCaching

    /// The entry stored for `key`, from the one database that holds it; `nil` if none is stored,
    /// or if the row found is damaged (its key or CRC-32C does not match) or older than
    /// ``Configuration/maximumAge``, in which case it is removed.
    ///
    /// - Throws: `CacheError.Code.unavailable` if the database is down (within
    ///   ``Configuration/retryInterval`` of a failure), fails, or does not answer within
    ///   ``Configuration/readTimeout``, or the caller was cancelled;
    ///   `CacheError.Code.invalidConfiguration` if its schema is of a version this code does not
    ///   know. A `ResourceLoader` reads either as a miss.
    public func entry(forKey key: String) async throws(CacheError) -> DataCacheEntry? {
        let digest = KeyDigest(key: key)
        let database = self.database(for: digest)
        let buffer = ByteBuffer(bytes: digest.bytes)
        let read = try await database.perform("reading", timeout: self.configuration.readTimeout) { connection in
            try await connection.query(CacheTable.read(buffer), logger: Self.quiet).collect().first.map(
                CacheTable.decode
            )
        }
        guard var row = read else {
            self.counters.miss()
            return nil
        }
        if row.value == nil {
            // A large value, read on its own within the time its size needs.
            let statement = CacheTable.readValue(buffer, id: row.id)
            row.value = try await database.perform("reading a large value", timeout: self.timeout(for: row.size)) {
                connection in
                try await connection.query(statement, logger: Self.quiet).collect().first?.decode(Data.self)
            }
        }
        // Replaced since: a miss.
        guard let value = row.value else {
            self.counters.miss()
            return nil
        }
        let created = Date(timeIntervalSince1970: row.created)
        let age = self.now().timeIntervalSince(created)
        let isIntact = row.key == Data(key.utf8) && row.checksum == Self.checksum(value, row.metadata)
        // Compared in constant time.
        let isTrusted = self.signingKey.map { signingKey in
            Self.code(
                key: key,
                metadata: row.metadata,
                value: value,
                created: row.created,
                tags: row.tags,
                using: signingKey
            ) == row.signature
        }
        guard isIntact, isTrusted != false, age < self.configuration.maximumAge.seconds else {
            self.counters.miss()
            if isIntact, isTrusted == false {
                // Not removed: a node with another key (a fleet changing keys) would otherwise
                // remove the rows of the rest. This node's own write replaces it.
                self.untrusted(database)
                return nil
            }
            if !isIntact { self.counters.corrupt() }
            let id = row.id
            // Bounded like the read it follows: a load waits for it.
            _ = try? await database.perform(
                "removing a damaged or expired entry",
                timeout: self.configuration.readTimeout
            ) {
                connection in
                _ = try await connection.query(CacheTable.remove(buffer, id: id), logger: Self.quiet).collect()
            }
            return nil
        }
        self.counters.hit()
        return DataCacheEntry(key: key, data: value, metadata: row.metadata, created: created)
    }

    /// Stores `data` and `metadata` for `key` in the database that holds it, replacing any entry,
    /// dated by the cache's clock. It does not read the database's size: a write that takes it
    /// over ``Configuration/maximumSize`` as this process knows it, one after every 64th of that
    /// size this process writes, and every 64th write to that database then trim the oldest
    /// rows (see `SizeEstimate`); a trim that fails is not an error.
    ///
    /// - Throws: `CacheError.Code.invalidArgument` for a value over
    ///   ``Configuration/maximumEntrySize``; `CacheError.Code.unavailable` if the database is
    ///   down, fails, or does not answer within ``Configuration/writeTimeout``;
    ///   `CacheError.Code.invalidConfiguration` if its schema is of a version this code does not
    ///   know.
    public func set(_ data: Data, forKey key: String, metadata: Data) async throws(CacheError) {
        guard data.count <= self.maximumEntrySize else {
            throw CacheError(
                .invalidArgument,
                "A value of \(data.count) bytes is larger than the shared cache's maximumEntrySize "
                    + "(\(self.maximumEntrySize))."
            )
        }
        let size = key.utf8.count + data.count + metadata.count
        let digest = KeyDigest(key: key)
        let database = self.database(for: digest)
        let created = self.now().timeIntervalSince1970
        // Kept in their own column, whose index purges by tag read.
        let tags = StoredResponse(decoding: metadata).map { Array($0.surrogateKeys).sorted() } ?? []
        let signature = self.signingKey.map {
            Data(Self.code(key: key, metadata: metadata, value: data, created: created, tags: tags, using: $0))
        }
        let statement = CacheTable.write(
            digest: ByteBuffer(bytes: digest.bytes),
            key: ByteBuffer(string: key),
            value: ByteBuffer(data: data),
            metadata: ByteBuffer(data: metadata),
            checksum: Self.checksum(data, metadata),
            created: created,
            tags: tags,
            signature: ByteBuffer(data: signature ?? Data())
        )
        try await database.perform("writing", timeout: self.timeout(for: Int64(size), from: self.writeTimeout)) {
            connection in
            _ = try await connection.query(statement, logger: Self.quiet).collect()
        }
        self.counters.write()
        if database.countWrite(size: Int64(size), maximumSize: Int64(self.configuration.maximumSize)) {
            // The entry is written; a trim that fails is counted, and the next write tries again.
            try? await self.trim(database)
        }
    }

    /// ``Configuration/maximumEntrySize``: a loader writes no larger value here.
    public var maximumEntrySize: Int { self.configuration.maximumEntrySize }

    /// Removes the entry for `key` from the database that holds it.
    ///
    /// - Returns: Whether there was one.
    /// - Throws: as ``set(_:forKey:metadata:)``.
    @discardableResult
    public func removeValue(forKey key: String) async throws(CacheError) -> Bool {
        let digest = KeyDigest(key: key)
        let buffer = ByteBuffer(bytes: digest.bytes)
        return try await self.database(for: digest).perform("removing", timeout: self.writeTimeout) { connection in
            try await connection.query(CacheTable.remove(buffer), logger: Self.quiet).collect().count > 0
        }
    }

    /// Removes from every database each entry that `isRemoved` accepts, given its key and
    /// metadata. It reads the keys and metadata of the whole table and deletes a row a
    /// statement, within ten write timeouts per database: for purges, not for a hot path.
    ///
    /// - Returns: How many entries were removed.
    /// - Throws: the error of the last database that failed (as ``set(_:forKey:metadata:)``
    ///   says), after the others were purged.
    public func removeValues(
        where isRemoved: @escaping @Sendable (_ key: String, _ metadata: Data) -> Bool
    ) async throws(CacheError) -> Int {
        var removed = 0
        var failure: CacheError?
        for database in self.databases {
            // The whole table is read: an administrative task, given ten write timeouts per
            // database. A database that fails does not stop the others.
            do throws(CacheError) {
                removed += try await self.removeValues(in: database, where: isRemoved)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return removed
    }

    /// Removes from every database the entries `removal` names, through the tables' indexes: a
    /// URL (with its variants) or a prefix by a range of the key index, a tag by the tags'
    /// index, 1,000 rows a statement. A removal by date, whose date only the metadata holds,
    /// reads every row as ``removeValues(where:)`` does.
    ///
    /// - Returns: How many entries were removed.
    /// - Throws: the error of the last database that failed (as ``set(_:forKey:metadata:)``
    ///   says), after the others were purged.
    public func removeValues(matching removal: CacheRemoval) async throws(CacheError) -> Int {
        guard let statement = CacheTable.purge(removal) else {
            return try await self.removeValues { key, metadata in
                removal.matches(key: key) { StoredResponse(decoding: metadata) }
            }
        }
        var removed = 0
        var failure: CacheError?
        for database in self.databases {
            do throws(CacheError) {
                removed += try await database.perform("purging", timeout: self.writeTimeout * 10) { connection in
                    var count = 0
                    while true {
                        let row = try await connection.query(statement, logger: Self.quiet).collect().first
                        let (chosen, removed) = try row?.decode((Int, Int).self) ?? (0, 0)
                        count += removed
                        // A batch that removed fewer than it chose lost rows to another session
                        // (a trim, another purge): only one that found fewer ends the purge.
                        if chosen < CacheTable.purgeBatch { return count }
                        try Task.checkCancellation()
                    }
                }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return removed
    }

    private func removeValues(
        in database: CacheDatabase,
        where isRemoved: @escaping @Sendable (_ key: String, _ metadata: Data) -> Bool
    ) async throws(CacheError) -> Int {
        try await database.perform("purging", timeout: self.writeTimeout * 10) { connection in
            var doomed: [ByteBuffer] = []
            let rows = try await connection.query(
                "SELECT digest, key, metadata FROM cachalot_entries",
                logger: Self.quiet
            )
            for try await (digest, key, metadata) in rows.decode((ByteBuffer, Data, Data).self)
            where isRemoved(String(decoding: key, as: UTF8.self), metadata) {
                doomed.append(digest)
            }
            var count = 0
            for digest in doomed {
                count += try await connection.query(CacheTable.remove(digest), logger: Self.quiet).collect().count
            }
            return count
        }
    }

    /// Empties the entries' table of every database, and zeroes its counts, one database after
    /// the other.
    ///
    /// - Throws: as ``set(_:forKey:metadata:)``, at the first database that fails; the ones after
    ///   it are left as they were.
    public func removeAll() async throws(CacheError) {
        for database in self.databases {
            try await database.perform("clearing", timeout: self.writeTimeout) { connection in
                try await connection.withTransaction(logger: Self.quiet) { connection in
                    _ = try await connection.query("TRUNCATE cachalot_entries", logger: Self.quiet).collect()
                    _ = try await connection.query(
                        "UPDATE cachalot_usage SET bytes = 0, entries = 0",
                        logger: Self.quiet
                    ).collect()
                }
            }
        }
    }

    // MARK: - Size

    /// How much the cache holds, over all its databases.
    public struct Usage: Sendable, Hashable {
        /// The entries kept.
        public var entries: Int
        /// The bytes of their keys, values and metadata.
        public var bytes: Int

        /// Creates a usage of `entries` entries holding `bytes` bytes.
        public init(entries: Int, bytes: Int) {
            self.entries = entries
            self.bytes = bytes
        }
    }

    /// How much the cache holds, read from the counts the databases keep (no table is scanned).
    ///
    /// - Throws: `CacheError.Code.unavailable` if a database cannot be read.
    public func usage() async throws(CacheError) -> Usage {
        var usage = Usage(entries: 0, bytes: 0)
        for database in self.databases {
            let (entries, bytes) = try await database.perform("reading the size", timeout: self.writeTimeout) {
                connection in
                try await CacheTable.usage(on: connection, logger: Self.quiet)
            }
            usage.entries = Int(Int64(usage.entries).addingSaturated(entries))
            usage.bytes = Int(Int64(usage.bytes).addingSaturated(bytes))
        }
        return usage
    }

    /// Removes the oldest rows of `database` while it is over its size, and those older than the
    /// age limit among the oldest, a batch at a time (at most 10 batches a call), each batch its
    /// own transaction so that writers wait for none of them long; one trim at a time per
    /// database, whoever runs it (a session's advisory lock, let go at the end or with the
    /// connection). Tells `database` what it read of the size, or that it read none.
    private func trim(_ database: CacheDatabase) async throws(CacheError) {
        let (maximumSize, batch) = (Int64(self.configuration.maximumSize), self.configuration.trimBatchSize)
        let cutoff = self.now().timeIntervalSince1970 - self.configuration.maximumAge.seconds
        let removed: Int
        do {
            removed = try await self.trim(database, maximumSize: maximumSize, batch: batch, cutoff: cutoff)
        } catch {
            database.trimmed(toSize: nil, seen: 0)
            throw error
        }
        self.counters.trimmed(removed)
    }

    /// The trim, once it is due; answers the rows it removed.
    private func trim(
        _ database: CacheDatabase,
        maximumSize: Int64,
        batch: Int,
        cutoff: Double
    ) async throws(CacheError) -> Int {
        try await database.perform("trimming", timeout: self.writeTimeout) { connection in
            let isLocked =
                try await connection.query(
                    "SELECT pg_try_advisory_lock(\(CacheTable.trimLock))",
                    logger: Self.quiet
                ).collect().first?.decode(Bool.self) ?? false
            // Another process is trimming: what this one wrote before now, it will likely see.
            let seen = database.unseenBytes
            guard isLocked else {
                database.trimmed(toSize: nil, seen: seen)
                return 0
            }
            var removed = 0
            var failure: (any Error)?
            do {
                // Counts read from the database can say anything: sums saturate.
                var size = try await CacheTable.usage(on: connection, logger: Self.quiet).bytes
                for _ in 0..<10 {
                    let isFull = size > maximumSize
                    let sizes = try await connection.query(
                        CacheTable.trim(count: batch, all: isFull, cutoff: cutoff),
                        logger: Self.quiet
                    ).collect().map { try $0.decode(Int64.self) }
                    size = sizes.reduce(size) { $0.subtractingSaturated($1) }
                    removed += sizes.count
                    if sizes.isEmpty || (!isFull && sizes.count < batch) { break }
                }
                database.trimmed(toSize: size, seen: seen)
            } catch {
                failure = error
            }
            _ = try await connection.query(
                "SELECT pg_advisory_unlock(\(CacheTable.trimLock))",
                logger: Self.quiet
            ).collect()
            if let failure { throw failure }
            return removed
        }
    }

    // MARK: - Helpers

    /// The database `digest` belongs to: the one with the highest score (rendezvous hashing).
    private func database(for digest: KeyDigest) -> CacheDatabase {
        let word = digest.bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return self.databases.max { Self.score(word, $0.seed) < Self.score(word, $1.seed) } ?? self.databases[0]
    }

    /// SplitMix64's finalizer over the key's word and the database's seed.
    private static func score(_ word: UInt64, _ seed: UInt64) -> UInt64 {
        var z = word ^ seed
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// A row's HMAC under `signingKey`: of its key, metadata, value, time written and tags, each
    /// after its length (8 bytes, big-endian), so that no two rows give the same bytes. The time
    /// and tags are covered so that a writer of the table can neither keep a row past the age
    /// limit nor hide it from a purge by tag.
    private static func code(
        key: String,
        metadata: Data,
        value: Data,
        created: Double,
        tags: [String],
        using signingKey: SymmetricKey
    ) -> HMAC<SHA256>.MAC {
        var hmac = HMAC<SHA256>(key: signingKey)
        let parts = [Data(key.utf8), metadata, value, withUnsafeBytes(of: created.bitPattern.bigEndian) { Data($0) }]
        for part in parts + tags.map({ Data($0.utf8) }) {
            withUnsafeBytes(of: UInt64(part.count).bigEndian) { hmac.update(data: $0) }
            hmac.update(data: part)
        }
        return hmac.finalize()
    }

    /// Counts a row whose HMAC did not verify, and logs the first.
    private func untrusted(_ database: CacheDatabase) {
        self.counters.unverified()
        let isFirst = self.loggedUnverified.withLock { logged in
            defer { logged = true }
            return !logged
        }
        if isFirst {
            self.logger.warning(
                """
                A row of the shared cache does not carry a valid signature under the signing key: it was \
                written by a node without the key or with another, or by someone else. Such rows are misses, \
                replaced by this node's own writes; this is logged once.
                """,
                metadata: ["database": "\(database.url)"]
            )
        }
    }

    private static func checksum(_ value: Data, _ metadata: Data) -> Int64 {
        var checksum = BodyChecksum()
        checksum.update(value)
        checksum.update(metadata)
        return Int64(checksum.value)
    }

    private var writeTimeout: Duration { self.configuration.writeTimeout }

    /// The time an operation on a row of `size` bytes is given: `base` (the read timeout by
    /// default), and a millisecond for every 64 KiB past ``CacheTable/inlineValueLimit`` (64 MB/s;
    /// a 32 MiB value read bare on loopback took 110–144 ms).
    private func timeout(for size: Int64, from base: Duration? = nil) -> Duration {
        let past = max(0, size - Int64(CacheTable.inlineValueLimit))
        return (base ?? self.configuration.readTimeout) + .milliseconds(past >> 16)
    }

    private static let quiet = Logger(label: "cachalot.postgres.queries", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Which database holds `key`, by its URL: for tests and tools.
    public func database(forKey key: String) -> DatabaseURL {
        self.database(for: KeyDigest(key: key)).url
    }
}

extension Int64 {
    /// The sum, or the nearest bound where it would overflow.
    func addingSaturated(_ other: Int64) -> Int64 {
        let (sum, overflow) = self.addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }

    /// The difference, or the nearest bound where it would overflow.
    func subtractingSaturated(_ other: Int64) -> Int64 {
        let (difference, overflow) = self.subtractingReportingOverflow(other)
        return overflow ? (other < 0 ? .max : .min) : difference
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let (seconds, attoseconds) = self.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
