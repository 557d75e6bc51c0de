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
                        created double precision NOT NULL
                    )
                    """
            ),
            "CREATE INDEX IF NOT EXISTS cachalot_entries_by_id ON cachalot_entries (id)",
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

    /// Makes sure the schema is there, whole, creating what is missing; returns the version
    /// found. A schema that is there costs one statement.
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
            if rows[0].0 != Self.version || rows[0].1 { return rows[0].0 }
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42P01" {
            // No schema: made below, unless another process makes it first.
        }
        return try await connection.withTransaction(logger: logger) { connection in
            _ = try await connection.query("SELECT pg_advisory_xact_lock(\(Self.schemaLock))", logger: logger)
                .collect()
            for statement in Self.creation(isUnlogged: isUnlogged) {
                _ = try await connection.query(statement, logger: logger).collect()
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
