import Cachalot
import Foundation

extension PostgresCache {
    /// How a ``PostgresCache`` reaches its databases and bounds what it keeps.
    public struct Configuration: Sendable {
        /// The databases, as `postgres://user[:password]@host[:port]/database` URLs; each key is
        /// kept on one of them, chosen by rendezvous hashing, so that adding a database moves
        /// about 1/*n* of the keys. Order does not matter. No default: at least one is needed.
        public var databases: [DatabaseURL]
        /// The most bytes of keys, values and metadata kept in each database; past it, the
        /// oldest entries are removed in small batches as writes go on (first in, first out).
        /// Default: 1 GiB.
        public var maximumSize: Int
        /// How long an entry is kept after it was written; an older one reads as a miss and is
        /// removed. Default: 7 days.
        public var maximumAge: Duration
        /// How long a read may take before it counts as a miss and the database as unavailable.
        /// Default: 50 ms.
        public var readTimeout: Duration
        /// How long a write, a removal or a trim may take. Writes are made in the background,
        /// so this bounds how long they hold memory, not an answer. Default: 2 s.
        public var writeTimeout: Duration
        /// How long a database that failed is left alone before it is tried again; meanwhile
        /// its reads are misses and its writes are dropped, at once. Default: 1 s.
        public var retryInterval: Duration
        /// Whether the entries' table is created `UNLOGGED`: faster writes, emptied if the
        /// database crashes (which a cache can afford), and not copied to replicas. Only
        /// counts when the table is created. Default: `false`.
        public var isUnlogged: Bool
        /// The most connections opened to each database. Default: 8.
        public var maximumConnections: Int
        /// The most entries one trim removes in one statement. Default: 100.
        public var trimBatchSize: Int
        /// The most bytes of value (a response's body) one row may hold: a loader writes no larger
        /// one here, and ``PostgresCache/set(_:forKey:metadata:)`` refuses one. Default: 32 MiB.
        public var maximumEntrySize: Int
        /// A key, at least 16 bytes, that every node of the fleet shares: each row written carries
        /// an HMAC-SHA256 under it of its key, metadata and bytes, and a row read whose HMAC does
        /// not verify is a miss (counted in ``Statistics/unverifiedEntries`` and logged once; left
        /// for this node's own write of the entry to replace). Without it, a row carries no HMAC and is trusted as its CRC-32C allows:
        /// anyone who can write the table, or sit between a node and its database, can then
        /// serve any body to the fleet. Default: `nil`.
        public var signingKey: Data?

        /// Creates a configuration; every parameter but `databases` defaults to the value its
        /// property names.
        public init(
            databases: [DatabaseURL],
            maximumSize: Int = 1 << 30,
            maximumAge: Duration = .seconds(7 * 24 * 3600),
            readTimeout: Duration = .milliseconds(50),
            writeTimeout: Duration = .seconds(2),
            retryInterval: Duration = .seconds(1),
            isUnlogged: Bool = false,
            maximumConnections: Int = 8,
            trimBatchSize: Int = 100,
            maximumEntrySize: Int = 32 << 20,
            signingKey: Data? = nil
        ) {
            self.databases = databases
            self.maximumSize = maximumSize
            self.maximumAge = maximumAge
            self.readTimeout = readTimeout
            self.writeTimeout = writeTimeout
            self.retryInterval = retryInterval
            self.isUnlogged = isUnlogged
            self.maximumConnections = maximumConnections
            self.trimBatchSize = trimBatchSize
            self.maximumEntrySize = maximumEntrySize
            self.signingKey = signingKey
        }

        func validate() throws(CacheError) {
            if let key = self.signingKey, key.count < 16 {
                throw CacheError(
                    .invalidConfiguration,
                    "signingKey must have at least 16 bytes (got \(key.count)): a shorter one can be guessed."
                )
            }
            guard !self.databases.isEmpty else {
                throw CacheError(.invalidConfiguration, "A PostgresCache needs at least one database URL.")
            }
            guard Set(self.databases.map(\.identity)).count == self.databases.count else {
                throw CacheError(.invalidConfiguration, "The same database is named twice: \(self.databases).")
            }
            guard self.maximumEntrySize > 0 else {
                throw CacheError(
                    .invalidConfiguration,
                    "maximumEntrySize must be greater than 0 (got \(self.maximumEntrySize))."
                )
            }
            guard self.maximumSize > 0 else {
                throw CacheError(.invalidConfiguration, "maximumSize must be greater than 0 (got \(self.maximumSize)).")
            }
            for (name, value) in [
                ("maximumAge", self.maximumAge), ("readTimeout", self.readTimeout),
                ("writeTimeout", self.writeTimeout),
            ] where value <= .zero {
                throw CacheError(.invalidConfiguration, "\(name) must be greater than 0 (got \(value)).")
            }
            guard self.retryInterval >= .zero else {
                throw CacheError(
                    .invalidConfiguration,
                    "retryInterval must not be negative (got \(self.retryInterval))."
                )
            }
            guard self.maximumConnections > 0, self.trimBatchSize > 0 else {
                throw CacheError(
                    .invalidConfiguration,
                    "maximumConnections and trimBatchSize must be greater than 0 "
                        + "(got \(self.maximumConnections) and \(self.trimBatchSize))."
                )
            }
        }
    }
}
