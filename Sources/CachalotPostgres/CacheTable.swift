import Cachalot
import Foundation
import NIOCore
import PostgresNIO

/// The SQL of one database's cache: the schema (version 1) and the statements on it.
///
/// - `cachalot_schema` holds the schema's version, one row.
/// - `cachalot_entries` holds an entry a row: the SHA-256 digest of its key (the primary key),
///   the key itself (compared whole on read), the bytes, the metadata, their size, a CRC-32C of
///   both (checked on read), when it was written, and `id`, from a sequence, in the order of
///   writing: trims remove the lowest ids first (first in, first out) through its index.
/// - `cachalot_usage` holds the bytes and entries of the table, kept by a trigger on
///   `cachalot_entries` in 16 rows (by the digest's first byte, so that writers seldom wait
///   for one another): the size is known without scanning the table.
enum CacheTable {
    /// The version of the schema this code reads and writes.
    static let version = 1

    /// How many rows `cachalot_usage` spreads the counts over.
    static let usageSlots = 16

    /// The statements that create the schema, in order.
    static func creation(isUnlogged: Bool) -> [PostgresQuery] {
        [
            "CREATE TABLE cachalot_schema (version integer NOT NULL)",
            "INSERT INTO cachalot_schema (version) VALUES (\(Self.version))",
            "CREATE SEQUENCE cachalot_entries_id",
            PostgresQuery(
                unsafeSQL: """
                    CREATE \(isUnlogged ? "UNLOGGED " : "")TABLE cachalot_entries (
                        digest bytea PRIMARY KEY,
                        id bigint NOT NULL DEFAULT nextval('cachalot_entries_id'),
                        key bytea NOT NULL,
                        value bytea NOT NULL,
                        metadata bytea NOT NULL,
                        size bigint NOT NULL,
                        checksum bigint NOT NULL,
                        created double precision NOT NULL
                    )
                    """
            ),
            "CREATE INDEX cachalot_entries_by_id ON cachalot_entries (id)",
            PostgresQuery(
                unsafeSQL: """
                    CREATE TABLE cachalot_usage (
                        slot integer PRIMARY KEY, bytes bigint NOT NULL, entries bigint NOT NULL
                    )
                    """
            ),
            PostgresQuery(
                unsafeSQL: """
                    INSERT INTO cachalot_usage (slot, bytes, entries)
                    SELECT slot, 0, 0 FROM generate_series(0, \(Self.usageSlots - 1)) AS slot
                    """
            ),
            PostgresQuery(
                unsafeSQL: """
                    CREATE FUNCTION cachalot_account() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        IF TG_OP = 'INSERT' THEN
                            UPDATE cachalot_usage SET bytes = bytes + NEW.size, entries = entries + 1
                            WHERE slot = get_byte(NEW.digest, 0) % \(Self.usageSlots);
                        ELSIF TG_OP = 'UPDATE' THEN
                            UPDATE cachalot_usage SET bytes = bytes + NEW.size - OLD.size
                            WHERE slot = get_byte(NEW.digest, 0) % \(Self.usageSlots);
                        ELSE
                            UPDATE cachalot_usage SET bytes = bytes - OLD.size, entries = entries - 1
                            WHERE slot = get_byte(OLD.digest, 0) % \(Self.usageSlots);
                        END IF;
                        RETURN NULL;
                    END $$
                    """
            ),
            PostgresQuery(
                unsafeSQL: """
                    CREATE TRIGGER cachalot_entries_usage AFTER INSERT OR UPDATE OR DELETE ON cachalot_entries
                    FOR EACH ROW EXECUTE FUNCTION cachalot_account()
                    """
            ),
        ]
    }

    /// The advisory lock that one creation of the schema at a time holds.
    static let schemaLock: Int64 = 0x6361_6368_616c_6f01
    /// The advisory lock that one trim at a time holds.
    static let trimLock: Int64 = 0x6361_6368_616c_6f02

    /// Makes sure the schema is there, creating it if it is not; returns the version found.
    /// A schema that is there costs one statement.
    static func prepare(on connection: PostgresConnection, isUnlogged: Bool, logger: Logger) async throws -> Int {
        do {
            let versions = try await connection.query("SELECT version FROM cachalot_schema", logger: logger)
                .collect().map { try $0.decode(Int.self) }
            // A table without its row is not a schema this code made: no version.
            return versions.count == 1 ? versions[0] : 0
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42P01" {
            // No such table: made below, unless another process makes it first.
        }
        return try await connection.withTransaction(logger: logger) { connection in
            _ = try await connection.query("SELECT pg_advisory_xact_lock(\(Self.schemaLock))", logger: logger)
                .collect()
            let exists =
                try await connection.query(
                    "SELECT to_regclass('cachalot_schema') IS NOT NULL",
                    logger: logger
                ).collect().first?.decode(Bool.self) ?? false
            if exists {
                let versions = try await connection.query("SELECT version FROM cachalot_schema", logger: logger)
                    .collect().map { try $0.decode(Int.self) }
                // A table without its row is not a schema this code made: no version.
                return versions.count == 1 ? versions[0] : 0
            }
            for statement in Self.creation(isUnlogged: isUnlogged) {
                _ = try await connection.query(statement, logger: logger).collect()
            }
            return Self.version
        }
    }

    /// A row as read.
    struct Row {
        var id: Int64
        var key: Data
        var value: Data
        var metadata: Data
        var checksum: Int64
        var created: Double
    }

    static func read(_ digest: ByteBuffer) -> PostgresQuery {
        "SELECT id, key, value, metadata, checksum, created FROM cachalot_entries WHERE digest = \(digest)"
    }

    static func decode(_ row: PostgresRow) throws -> Row {
        let (id, key, value, metadata, checksum, created) = try row.decode(
            (Int64, Data, Data, Data, Int64, Double).self
        )
        return Row(id: id, key: key, value: value, metadata: metadata, checksum: checksum, created: created)
    }

    /// Writes a row; answers the table's size in bytes before it.
    static func write(
        digest: ByteBuffer,
        key: ByteBuffer,
        value: ByteBuffer,
        metadata: ByteBuffer,
        checksum: Int64,
        created: Double
    ) -> PostgresQuery {
        let size = Int64(key.readableBytes + value.readableBytes + metadata.readableBytes)
        return """
            WITH written AS (
                INSERT INTO cachalot_entries (digest, key, value, metadata, size, checksum, created)
                VALUES (\(digest), \(key), \(value), \(metadata), \(size), \(checksum), \(created))
                ON CONFLICT (digest) DO UPDATE SET
                    id = nextval('cachalot_entries_id'), key = excluded.key, value = excluded.value,
                    metadata = excluded.metadata, size = excluded.size, checksum = excluded.checksum,
                    created = excluded.created
                RETURNING 1
            )
            SELECT coalesce(sum(bytes), 0)::bigint FROM cachalot_usage
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
