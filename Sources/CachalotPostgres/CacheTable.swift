import Cachalot
import Foundation
import NIOCore
import PostgresNIO

/// The SQL of one database's cache: the schema (version 2) and the statements on it.
///
/// - `cachalot_schema` holds the schema's version, one row.
/// - `cachalot_entries` holds an entry a row: the SHA-256 digest of its key (the primary key),
///   the key itself (compared whole on read), the bytes, the metadata, their size, a CRC-32C of
///   both (checked on read), when it was written, and `id`, from a sequence, in the order of
///   writing: trims remove the lowest ids first (first in, first out) through its index.
///   `signature` holds an HMAC-SHA256 of the key, metadata, value, time written and tags under
///   the fleet's signing key, if it has one (else it is empty). `tags` holds the stored response's tags (`Surrogate-Key`, `Cache-Tag`). Purges go through
///   indexes: on the key's first ``keyIndexLength`` bytes (a URL and its variants, a prefix),
///   which a range of keys reads in order, and a GIN index on the tags.
/// - `cachalot_usage` holds the bytes and entries of the table, kept by a trigger on
///   `cachalot_entries` in 16 rows (by the digest's first byte, so that writers seldom wait
///   for one another): the size is known without scanning the table.
enum CacheTable {
    /// The version of the schema this code reads and writes.
    static let version = 2

    /// How many of a key's first bytes its index holds: a B-tree row must stay under about
    /// 2,700 bytes, and a URL may be longer.
    static let keyIndexLength = 1024

    /// How many rows one statement of a purge removes: a purge of many rows is many short
    /// statements, none of which holds its locks long.
    static let purgeBatch = 1000

    /// How many rows `cachalot_usage` spreads the counts over.
    static let usageSlots = 16

    /// The statements that create the schema, in order; each leaves what is there already.
    static func creation(isUnlogged: Bool) -> [PostgresQuery] {
        let unlogged = isUnlogged ? "UNLOGGED " : ""
        return [
            "CREATE TABLE IF NOT EXISTS cachalot_schema (version integer NOT NULL)",
            "INSERT INTO cachalot_schema (version) SELECT \(Self.version) WHERE NOT EXISTS (SELECT FROM cachalot_schema)",
            "CREATE SEQUENCE IF NOT EXISTS cachalot_entries_id",
            PostgresQuery(
                unsafeSQL: """
                    CREATE \(unlogged)TABLE IF NOT EXISTS cachalot_entries (
                        digest bytea PRIMARY KEY,
                        id bigint NOT NULL DEFAULT nextval('cachalot_entries_id'),
                        key bytea NOT NULL,
                        value bytea NOT NULL,
                        metadata bytea NOT NULL,
                        size bigint NOT NULL,
                        checksum bigint NOT NULL,
                        created double precision NOT NULL,
                        tags text[] NOT NULL DEFAULT '{}',
                        signature bytea NOT NULL DEFAULT ''
                    )
                    """
            ),
            "CREATE INDEX IF NOT EXISTS cachalot_entries_by_id ON cachalot_entries (id)",
            // A table of version 1 has no tags.
            "ALTER TABLE cachalot_entries ADD COLUMN IF NOT EXISTS tags text[] NOT NULL DEFAULT '{}'",
            "ALTER TABLE cachalot_entries ADD COLUMN IF NOT EXISTS signature bytea NOT NULL DEFAULT ''",
            PostgresQuery(
                unsafeSQL: """
                    CREATE INDEX IF NOT EXISTS cachalot_entries_by_key
                    ON cachalot_entries (substring(key from 1 for \(Self.keyIndexLength)))
                    """
            ),
            "CREATE INDEX IF NOT EXISTS cachalot_entries_by_tag ON cachalot_entries USING gin (tags)",
            // Unlogged with the entries, so that a crash empties both alike.
            PostgresQuery(
                unsafeSQL: """
                    CREATE \(unlogged)TABLE IF NOT EXISTS cachalot_usage (
                        slot integer PRIMARY KEY, bytes bigint NOT NULL, entries bigint NOT NULL
                    )
                    """
            ),
            // Upserted, so that a slot whose row is missing is made again.
            PostgresQuery(
                unsafeSQL: """
                    CREATE OR REPLACE FUNCTION cachalot_account() RETURNS trigger LANGUAGE plpgsql AS $$
                    DECLARE
                        changed_slot integer;
                        delta_bytes bigint := 0;
                        delta_entries bigint := 0;
                    BEGIN
                        IF TG_OP IN ('INSERT', 'UPDATE') THEN
                            changed_slot := get_byte(NEW.digest, 0) % \(Self.usageSlots);
                            delta_bytes := NEW.size;
                            delta_entries := 1;
                        END IF;
                        IF TG_OP IN ('UPDATE', 'DELETE') THEN
                            changed_slot := get_byte(OLD.digest, 0) % \(Self.usageSlots);
                            delta_bytes := delta_bytes - OLD.size;
                            delta_entries := delta_entries - 1;
                        END IF;
                        INSERT INTO cachalot_usage AS usage (slot, bytes, entries)
                        VALUES (changed_slot, delta_bytes, delta_entries)
                        ON CONFLICT (slot) DO UPDATE
                        SET bytes = usage.bytes + excluded.bytes, entries = usage.entries + excluded.entries;
                        RETURN NULL;
                    END $$
                    """
            ),
            PostgresQuery(
                unsafeSQL: """
                    CREATE OR REPLACE TRIGGER cachalot_entries_usage
                    AFTER INSERT OR UPDATE OR DELETE ON cachalot_entries
                    FOR EACH ROW EXECUTE FUNCTION cachalot_account()
                    """
            ),
        ]
    }

    /// The statements that remove the schema, for an operator.
    static let removal =
        "DROP TABLE cachalot_entries, cachalot_usage, cachalot_schema; DROP SEQUENCE cachalot_entries_id; "
        + "DROP FUNCTION cachalot_account"

    /// The advisory lock that one creation of the schema at a time holds.
    static let schemaLock: Int64 = 0x6361_6368_616c_6f01
    /// The advisory lock that one trim at a time holds.
    static let trimLock: Int64 = 0x6361_6368_616c_6f02

    /// What upgrades a schema of version 1, once its rows are removed (their tags were never
    /// kept, and a purge by tag would miss them; it is a cache: they are fetched again) and
    /// ``creation(isUnlogged:)`` has added its columns and indexes.
    static let upgrade: [PostgresQuery] = [
        "UPDATE cachalot_usage SET bytes = 0, entries = 0",
        "UPDATE cachalot_schema SET version = \(Self.version) WHERE version = 1",
    ]

    /// Makes sure the schema is there, whole, creating what is missing, and upgrades one of
    /// version 1; returns the version found. A schema that is there costs one statement.
    static func prepare(on connection: PostgresConnection, isUnlogged: Bool, logger: Logger) async throws -> Int {
        let check: PostgresQuery = """
            SELECT version, to_regclass('cachalot_entries') IS NOT NULL AND to_regclass('cachalot_usage') IS NOT NULL
            FROM cachalot_schema
            """
        do {
            let rows = try await connection.query(check, logger: logger).collect().map {
                try $0.decode((Int, Bool).self)
            }
            // A table without its one row is not a schema this code made: no version.
            guard rows.count == 1 else { return 0 }
            let (version, isWhole) = rows[0]
            // Version 1 is upgraded below; another version is left alone.
            if version != 1 && (version != Self.version || isWhole) { return version }
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42P01" {
            // No schema: made below, unless another process makes it first.
        }
        return try await connection.withTransaction(logger: logger) { connection in
            _ = try await connection.query("SELECT pg_advisory_xact_lock(\(Self.schemaLock))", logger: logger)
                .collect()
            // Version 1's rows go before its table is altered and indexed: on an empty table.
            let creation = Self.creation(isUnlogged: isUnlogged)
            _ = try await connection.query(creation[0], logger: logger).collect()
            let found = try await connection.query(check, logger: logger).collect().map {
                try $0.decode((Int, Bool).self)
            }
            // Made whole by another process while this one waited for the lock: its statements
            // would only take locks that writers wait for (a trigger's replacement blocks them).
            if found.count == 1, found[0] == (Self.version, true) { return Self.version }
            let upgrades = found.map(\.0) == [1]
            if upgrades { _ = try await connection.query("TRUNCATE cachalot_entries", logger: logger).collect() }
            for statement in creation.dropFirst() {
                _ = try await connection.query(statement, logger: logger).collect()
            }
            if upgrades {
                for statement in Self.upgrade {
                    _ = try await connection.query(statement, logger: logger).collect()
                }
            }
            let versions = try await connection.query("SELECT version FROM cachalot_schema", logger: logger)
                .collect().map { try $0.decode(Int.self) }
            return versions.count == 1 ? versions[0] : 0
        }
    }

    /// A row as read.
    struct Row {
        var id: Int64
        var key: Data
        /// `nil` if it is over ``CacheTable/inlineValueLimit``, to be read on its own.
        var value: Data?
        var metadata: Data
        var checksum: Int64
        var created: Double
        var tags: [String]
        var signature: Data
        /// The bytes of key, value and metadata.
        var size: Int64
    }

    /// The most bytes of value a read brings with the rest of its row: a larger value is read by
    /// a second statement (``readValue(_:id:)``), given time for its size, so that a large row
    /// is not taken for a database that is down.
    static let inlineValueLimit = 4 << 20

    /// Reads the row of `digest`; its value is NULL if it is over ``inlineValueLimit``.
    static func read(_ digest: ByteBuffer) -> PostgresQuery {
        """
        SELECT id, key, CASE WHEN size <= \(unescaped: String(Self.inlineValueLimit)) THEN value END, metadata,
            checksum, created, tags, signature, size
        FROM cachalot_entries WHERE digest = \(digest)
        """
    }

    /// Reads the value of `digest`'s row, if it is still the one numbered `id`.
    static func readValue(_ digest: ByteBuffer, id: Int64) -> PostgresQuery {
        "SELECT value FROM cachalot_entries WHERE digest = \(digest) AND id = \(id)"
    }

    static func decode(_ row: PostgresRow) throws -> Row {
        let (id, key, value, metadata, checksum, created, tags, signature, size) = try row.decode(
            (Int64, Data, Data?, Data, Int64, Double, [String], Data, Int64).self
        )
        return Row(
            id: id,
            key: key,
            value: value,
            metadata: metadata,
            checksum: checksum,
            created: created,
            tags: tags,
            signature: signature,
            size: size
        )
    }

    /// Writes a row. It does not read the table's size back: summing `cachalot_usage` made a
    /// set about a tenth slower (38–106 µs of 32 KiB UNLOGGED sets of 687–902 µs, in
    /// `Benchmarks/shared-tier-vs-postgres-redis`); trims read it (see
    /// `CacheDatabase.countWrite(size:maximumSize:)`).
    static func write(
        digest: ByteBuffer,
        key: ByteBuffer,
        value: ByteBuffer,
        metadata: ByteBuffer,
        checksum: Int64,
        created: Double,
        tags: [String],
        signature: ByteBuffer
    ) -> PostgresQuery {
        let size = Int64(key.readableBytes + value.readableBytes + metadata.readableBytes)
        return """
            INSERT INTO cachalot_entries (digest, key, value, metadata, size, checksum, created, tags, signature)
            VALUES (\(digest), \(key), \(value), \(metadata), \(size), \(checksum), \(created), \(tags), \(signature))
            ON CONFLICT (digest) DO UPDATE SET
                id = nextval('cachalot_entries_id'), key = excluded.key, value = excluded.value,
                metadata = excluded.metadata, size = excluded.size, checksum = excluded.checksum,
                created = excluded.created, tags = excluded.tags, signature = excluded.signature
            """
    }

    /// Removes the row of `digest`, only if it is still the one numbered `id` (when given): a
    /// row found damaged is removed, not the good one that replaced it meanwhile. Answers a row
    /// for a row removed.
    static func remove(_ digest: ByteBuffer, id: Int64? = nil) -> PostgresQuery {
        if let id {
            return "DELETE FROM cachalot_entries WHERE digest = \(digest) AND id = \(id) RETURNING 1"
        }
        return "DELETE FROM cachalot_entries WHERE digest = \(digest) RETURNING 1"
    }

    /// Removes up to ``purgeBatch`` of the rows `removal` names, found through an index, and
    /// answers how many it chose and how many it removed (fewer, if another session removed
    /// some meanwhile); `nil` for a removal no index serves (``CacheRemoval/storedBefore(_:)``,
    /// whose date is in the metadata). Run again until it chooses fewer than a batch.
    static func purge(_ removal: CacheRemoval) -> PostgresQuery? {
        let indexed = "substring(key from 1 for \(Self.keyIndexLength))"
        let head = "WITH doomed AS (SELECT digest FROM cachalot_entries WHERE"
        let tail = """
            LIMIT \(Self.purgeBatch)), removed AS (
                DELETE FROM cachalot_entries AS entries USING doomed WHERE entries.digest = doomed.digest RETURNING 1
            )
            SELECT (SELECT count(*) FROM doomed)::bigint, (SELECT count(*) FROM removed)::bigint
            """
        switch removal {
        case .url(let url) where !url.isEmpty:
            let (low, high) = Self.range(Array(url.utf8))
            let variants = ByteBuffer(bytes: Array(url.utf8) + [0x0A])
            return """
                \(unescaped: head) \(unescaped: indexed) >= \(low) AND \(unescaped: indexed) < \(high)
                AND (key = \(ByteBuffer(string: url))
                     OR substring(key from 1 for \(unescaped: String(variants.readableBytes))) = \(variants))
                \(unescaped: tail)
                """
        case .prefix(let prefix) where !prefix.isEmpty:
            let (low, high) = Self.range(Array(prefix.utf8))
            let bytes = ByteBuffer(string: prefix)
            return """
                \(unescaped: head) \(unescaped: indexed) >= \(low) AND \(unescaped: indexed) < \(high)
                AND substring(key from 1 for \(unescaped: String(bytes.readableBytes))) = \(bytes)
                \(unescaped: tail)
                """
        case .tag(let tag):
            return "\(unescaped: head) tags @> ARRAY[\(tag)]::text[] \(unescaped: tail)"
        case .all, .prefix, .url:
            // An empty prefix names every key; an empty URL, the empty key and the keys that
            // start with a line feed, as in memory and on disk.
            if case .url = removal {
                let variants = ByteBuffer(bytes: [0x0A])
                return """
                    \(unescaped: head) (key = ''::bytea OR substring(key from 1 for 1) = \(variants)) \(unescaped: tail)
                    """
            }
            return "\(unescaped: head) true \(unescaped: tail)"
        case .storedBefore:
            return nil
        }
    }

    /// The range of the key index that holds every key starting with `prefix` (not empty, and
    /// UTF-8, so without a byte 0xFF): from its first ``keyIndexLength`` bytes to the same with
    /// the last byte raised by one.
    private static func range(_ prefix: [UInt8]) -> (low: ByteBuffer, high: ByteBuffer) {
        let low = Array(prefix.prefix(Self.keyIndexLength))
        var high = low
        while let last = high.last, last == 0xFF { high.removeLast() }
        if !high.isEmpty { high[high.count - 1] += 1 }
        return (ByteBuffer(bytes: low), ByteBuffer(bytes: high))
    }

    static let usage: PostgresQuery =
        "SELECT coalesce(sum(entries), 0)::bigint, coalesce(sum(bytes), 0)::bigint FROM cachalot_usage"

    /// The entries and bytes that ``usage`` answers.
    static func usage(on connection: PostgresConnection, logger: Logger) async throws -> (entries: Int64, bytes: Int64)
    {
        guard let row = try await connection.query(Self.usage, logger: logger).collect().first else { return (0, 0) }
        return try row.decode((Int64, Int64).self)
    }

    /// Removes, of the `count` oldest rows that no one else holds, all of them if `all`, else
    /// those written before `cutoff`; answers their sizes.
    static func trim(count: Int, all: Bool, cutoff: Double) -> PostgresQuery {
        """
        WITH oldest AS (
            SELECT digest, created FROM cachalot_entries ORDER BY id LIMIT \(count) FOR UPDATE SKIP LOCKED
        )
        DELETE FROM cachalot_entries AS entries USING oldest
        WHERE entries.digest = oldest.digest AND (\(all) OR oldest.created < \(cutoff))
        RETURNING entries.size
        """
    }
}
