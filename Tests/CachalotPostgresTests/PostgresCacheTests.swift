import Cachalot
import CachalotPostgres
import CachalotTesting
import Foundation
import Testing

/// The PostgreSQL store on its own, against a real server.
@Suite(.enabled(if: PostgresCluster.isAvailable, "needs PostgreSQL"))
struct PostgresCacheTests {
    @Test func storesReadsAndRemovesEntriesCreatingTheSchemaOnFirstUse() async throws {
        try await PostgresCluster.with { cluster in
            let cache = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(cache) {
                #expect(try await cache.entry(forKey: "a") == nil)
                try await cache.set(Data("body".utf8), forKey: "a", metadata: Data("head".utf8))
                try await cache.set(Data("other".utf8), forKey: "b", metadata: Data())
                let entry = try #require(try await cache.entry(forKey: "a"))
                #expect(entry.key == "a")
                #expect(entry.data == Data("body".utf8))
                #expect(entry.metadata == Data("head".utf8))
                #expect(try await cache.usage() == .init(entries: 2, bytes: 1 + 4 + 4 + 1 + 5))
                // Replacing an entry replaces its size.
                try await cache.set(Data("longer body".utf8), forKey: "a", metadata: Data())
                #expect(try await cache.usage() == .init(entries: 2, bytes: 1 + 11 + 1 + 5))
                #expect(try await cache.removeValue(forKey: "a"))
                #expect(try await !cache.removeValue(forKey: "a"))
                #expect(try await cache.entry(forKey: "a") == nil)
                try await cache.removeAll()
                #expect(try await cache.entry(forKey: "b") == nil)
                #expect(try await cache.usage() == .init(entries: 0, bytes: 0))
                #expect(cache.statistics.hits == 1 && cache.statistics.writes == 3)
            }
            #expect(try await cluster.sql("SELECT version FROM cachalot_schema") == "2\n")
        }
    }

    @Test func aRowWhoseBytesNoLongerMatchTheirChecksumReadsAsAMissAndIsRemoved() async throws {
        try await PostgresCluster.with { cluster in
            let cache = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(cache) {
                try await cache.set(Data("the origin's bytes".utf8), forKey: "k", metadata: Data("m".utf8))
                try await cluster.sql("UPDATE cachalot_entries SET value = 'bytes the origin never sent'")
                #expect(try await cache.entry(forKey: "k") == nil)
                #expect(cache.statistics.corruptEntries == 1)
                #expect(try await cluster.sql("SELECT count(*) FROM cachalot_entries") == "0\n")
                #expect(try await cache.usage() == .init(entries: 0, bytes: 0))
            }
        }
    }

    @Test func aRowStoredUnderAnotherKeyReadsAsAMissAndIsRemoved() async throws {
        try await PostgresCluster.with { cluster in
            let cache = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(cache) {
                try await cache.set(Data("for a".utf8), forKey: "a", metadata: Data())
                try await cache.set(Data("for b".utf8), forKey: "b", metadata: Data())
                // The row of b now sits under a's digest: a collision, or a crafted row.
                try await cluster.sql(
                    """
                    DELETE FROM cachalot_entries WHERE key = 'a';
                    UPDATE cachalot_entries SET digest = sha256('a') WHERE key = 'b';
                    """
                )
                #expect(try await cache.entry(forKey: "a") == nil)
                #expect(cache.statistics.corruptEntries == 1)
                #expect(try await cluster.sql("SELECT count(*) FROM cachalot_entries") == "0\n")
            }
        }
    }

    @Test func withASigningKeyRowsWithoutAValidHMACAreMissesCountedAndLoggedOnce() async throws {
        let key = Data((0..<32).map { UInt8($0) })
        try await PostgresCluster.with { cluster in
            var signed = PostgresCache.Configuration.testing([cluster.database()])
            signed.signingKey = key
            let logs = WarningCounter()
            let writer = try PostgresCache(configuration: signed)
            let reader = try PostgresCache(configuration: signed, logger: logs.logger)
            let unsigned = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(writer) {
                try await running(reader) {
                    try await running(unsigned) {
                        try await writer.set(Data("signed".utf8), forKey: "a", metadata: Data("m".utf8))
                        #expect(try await reader.entry(forKey: "a")?.data == Data("signed".utf8))
                        // A node without the key, or anyone who can write the table: its rows
                        // are intact (key and CRC-32C) but carry no HMAC under the key.
                        try await unsigned.set(Data("forged".utf8), forKey: "b", metadata: Data())
                        try await unsigned.set(Data("forged".utf8), forKey: "c", metadata: Data())
                        #expect(try await reader.entry(forKey: "b") == nil)
                        #expect(try await reader.entry(forKey: "c") == nil)
                        // Another row's valid HMAC does not verify for this row: it covers the key.
                        try await writer.set(Data("signed".utf8), forKey: "d", metadata: Data("m".utf8))
                        try await cluster.sql(
                            """
                            UPDATE cachalot_entries SET signature = (SELECT signature FROM cachalot_entries WHERE key = 'a')
                            WHERE key = 'd'
                            """
                        )
                        #expect(try await reader.entry(forKey: "d") == nil)
                        // The HMAC covers the time written and the tags: a row made younger (to
                        // outlive the age limit) or stripped of its tags (to escape a purge) fails.
                        try await writer.set(Data("signed".utf8), forKey: "e", metadata: Data("m".utf8))
                        try await writer.set(Data("signed".utf8), forKey: "f", metadata: Data("m".utf8))
                        try await cluster.sql("UPDATE cachalot_entries SET created = created + 3600 WHERE key = 'e'")
                        try await cluster.sql("UPDATE cachalot_entries SET tags = '{hidden}' WHERE key = 'f'")
                        #expect(try await reader.entry(forKey: "e") == nil)
                        #expect(try await reader.entry(forKey: "f") == nil)
                        #expect(reader.statistics.unverifiedEntries == 5)
                        #expect(reader.statistics.corruptEntries == 0)
                        #expect(logs.warnings == 1)
                        // Left in place: the reader's own write replaces such a row.
                        #expect(try await cluster.sql("SELECT count(*) FROM cachalot_entries") == "6\n")
                        try await reader.set(Data("mine".utf8), forKey: "b", metadata: Data())
                        #expect(try await reader.entry(forKey: "b")?.data == Data("mine".utf8))
                        // A node without the key reads signed rows as any.
                        #expect(try await unsigned.entry(forKey: "a")?.data == Data("signed".utf8))
                    }
                }
            }
        }
        var short = PostgresCache.Configuration.testing([])
        short.databases = [DatabaseURL(host: "127.0.0.1", port: 5432, user: "u", database: "d")]
        short.signingKey = Data(count: 15)
        #expect { _ = try PostgresCache(configuration: short) } throws: {
            ($0 as? CacheError)?.code == .invalidConfiguration
        }
    }

    @Test func aConnectionToAnotherHostThatChecksNoCertificateIsWarnedOf() throws {
        for (url, warnings) in [
            ("postgres://u@db.example.com/cache", 1), ("postgres://u@db.example.com/cache?sslmode=require", 1),
            ("postgres://u@db.example.com/cache?sslmode=verify-full", 0),
            ("postgres://u@db.example.com/cache?sslmode=disable", 1), ("postgres://u@127.0.0.1/cache", 0),
            ("postgres://u@localhost/cache?sslmode=require", 0), ("postgres://u@[::1]/cache", 0),
        ] {
            let logs = WarningCounter()
            _ = try PostgresCache(configuration: .testing([DatabaseURL(url)]), logger: logs.logger)
            #expect(logs.warnings == warnings, "\(url)")
        }
    }

    /// Read with the rest of its row, a value of 96 MiB takes longer than the read timeout of
    /// 200 ms here (a 32 MiB one took 110–144 ms bare on loopback); read on its own, it is given
    /// the time its size needs, and the database is not taken for down.
    @Test func aLargeValueIsReadOnItsOwnWithinTheTimeItsSizeNeeds() async throws {
        // A megabyte of noise, 96 times: too far apart for PostgreSQL's compression to find.
        let noise = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 24) })
        let large = (0..<96).reduce(into: Data()) { data, _ in data.append(noise) }
        try await PostgresCluster.with { cluster in
            var configuration = PostgresCache.Configuration.testing([cluster.database()])
            configuration.readTimeout = .milliseconds(200)
            configuration.writeTimeout = .seconds(10)
            configuration.maximumEntrySize = 128 << 20
            let cache = try PostgresCache(configuration: configuration)
            try await running(cache) {
                try await cache.set(large, forKey: "large", metadata: Data("m".utf8))
                try await cache.set(Data("small".utf8), forKey: "small", metadata: Data())
                #expect(try await cache.entry(forKey: "large")?.data == large)
                #expect(try await cache.entry(forKey: "small")?.data == Data("small".utf8))
                #expect(cache.statistics.outages == 0 && cache.statistics.hits == 2)
                // Over the row limit: refused, not written.
                var limited = configuration
                limited.maximumEntrySize = 1 << 20
                let small = try PostgresCache(configuration: limited)
                await #expect { try await small.set(large, forKey: "other", metadata: Data()) } throws: {
                    ($0 as? CacheError)?.code == .invalidArgument
                }
            }
        }
    }

    @Test func aSchemaOfAnotherVersionIsAClearErrorAndIsLeftAlone() async throws {
        try await PostgresCluster.with { cluster in
            let cache = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(cache) { try await cache.prepare() }
            try await cluster.sql("UPDATE cachalot_schema SET version = 7")
            let newer = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(newer) {
                let error = await #expect(throws: CacheError.self) { try await newer.entry(forKey: "a") }
                #expect(error?.code == .invalidConfiguration)
                #expect(error?.message.contains("version 7") == true)
                await #expect(throws: CacheError.self) { try await newer.set(Data(), forKey: "a", metadata: Data()) }
                await #expect(throws: CacheError.self) { try await newer.prepare() }
            }
            #expect(try await cluster.sql("SELECT count(*) FROM cachalot_entries") == "0\n")
            #expect(try await cluster.sql("SELECT version FROM cachalot_schema") == "7\n")
        }
    }

    @Test func aSchemaDroppedUnderARunningCacheIsMadeAgainAfterOneFailure() async throws {
        try await PostgresCluster.with { cluster in
            let cache = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(cache) {
                try await cache.set(Data("a".utf8), forKey: "a", metadata: Data())
                try await cluster.sql(
                    """
                    DROP TABLE cachalot_entries, cachalot_usage, cachalot_schema;
                    DROP SEQUENCE cachalot_entries_id;
                    DROP FUNCTION cachalot_account;
                    """
                )
                await #expect(throws: CacheError.self) { try await cache.entry(forKey: "a") }
                try await cache.set(Data("b".utf8), forKey: "b", metadata: Data())
                #expect(try await cache.entry(forKey: "b")?.data == Data("b".utf8))
            }
        }
    }

    @Test func aSchemaMissingOnlyItsEntriesIsMadeWholeAgain() async throws {
        try await PostgresCluster.with { cluster in
            let cache = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(cache) { try await cache.prepare() }
            try await cluster.sql("DROP TABLE cachalot_entries")
            let again = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(again) {
                try await again.set(Data("b".utf8), forKey: "b", metadata: Data())
                #expect(try await again.entry(forKey: "b")?.data == Data("b".utf8))
            }
        }
    }

    @Test func anUnloggedTableAndItsCountsAreEmptiedTogetherByACrash() async throws {
        try await PostgresCluster.with { cluster in
            var configuration = PostgresCache.Configuration.testing([cluster.database()])
            configuration.isUnlogged = true
            let cache = try PostgresCache(configuration: configuration)
            try await running(cache) {
                try await cache.set(Data("before".utf8), forKey: "a", metadata: Data())
            }
            let persistence = try await cluster.sql(
                "SELECT relname, relpersistence FROM pg_class WHERE relname IN ('cachalot_entries', 'cachalot_usage') "
                    + "ORDER BY relname"
            )
            #expect(persistence == "cachalot_entries|u\ncachalot_usage|u\n")
            try await cluster.stop()
            try await cluster.start()
            let after = try PostgresCache(configuration: configuration)
            try await running(after) {
                #expect(try await after.entry(forKey: "a") == nil)
                try await after.set(Data("after".utf8), forKey: "b", metadata: Data())
                #expect(try await after.usage() == .init(entries: 1, bytes: 1 + 5))
            }
        }
    }

    @Test func aDatabaseThatFailedIsLeftAloneForTheRetryIntervalAndACancelledReadIsNoOutage() async throws {
        try await PostgresCluster.with { cluster in
            var configuration = PostgresCache.Configuration.testing([cluster.database()])
            configuration.readTimeout = .milliseconds(200)
            configuration.retryInterval = .seconds(3600)
            let cache = try PostgresCache(configuration: configuration)
            try await running(cache) {
                try await cache.prepare()
                let cancelled = Task { try await cache.entry(forKey: "a") }
                cancelled.cancel()
                _ = try? await cancelled.value
                #expect(cache.statistics.outages == 0)

                try await cluster.stop()
                await #expect(throws: CacheError.self) { try await cache.entry(forKey: "a") }
                #expect(cache.statistics.outages == 1)
                // Left alone: the next read does not try it.
                let skipped = await #expect(throws: CacheError.self) { try await cache.entry(forKey: "a") }
                #expect(skipped?.message.contains("is down") == true)
                #expect(cache.statistics.outages == 1)
                // (Its start-up connection may have failed too.)
                #expect(cache.statistics.failures >= 2)
            }
        }
    }

    /// postgres-nio's pool waits longer between connection attempts the longer they fail, up to
    /// 60 s: after 90 s of failures it waits about 20 s. The pool's back-off runs on the wall
    /// clock inside postgres-nio, so this test takes 90 s of it; loads come every 100 ms, as on
    /// a quiet node.
    @Test(.timeLimit(.minutes(3)))
    func aDatabaseBackAfterANinetySecondOutageIsUsedAgainWithinFiveSeconds() async throws {
        try await PostgresCluster.with { cluster in
            var configuration = PostgresCache.Configuration.testing([cluster.database()])
            (configuration.readTimeout, configuration.retryInterval) = (.seconds(1), .seconds(1))
            let cache = try PostgresCache(configuration: configuration)
            try await running(cache) {
                try await cache.set(Data("kept".utf8), forKey: "a", metadata: Data())
                try await cluster.stop()
                let clock = ContinuousClock()
                let end = clock.now + .seconds(90)
                while clock.now < end {
                    // Down: a miss, at once or once the pool gives up waiting.
                    #expect((try? await cache.entry(forKey: "a")) == nil)
                    try await clock.sleep(for: .milliseconds(100))
                }
                try await cluster.start()
                let back = clock.now
                var entry: DataCacheEntry?
                while entry == nil, clock.now - back < .seconds(60) {
                    entry = try? await cache.entry(forKey: "a")
                    if entry == nil { try await clock.sleep(for: .milliseconds(100)) }
                }
                let waited = clock.now - back
                #expect(entry?.data == Data("kept".utf8))
                #expect(waited < .seconds(5), "used again \(waited) after the database was")
                #expect(cache.statistics.outages == 1)
            }
        }
    }

    @Test func theSizeLimitHoldsByRemovingTheOldestEntriesFirst() async throws {
        try await PostgresCluster.with { cluster in
            var configuration = PostgresCache.Configuration.testing([cluster.database()])
            configuration.maximumSize = 64 << 10
            configuration.trimBatchSize = 4
            let cache = try PostgresCache(configuration: configuration)
            try await running(cache) {
                let body = Data(repeating: 7, count: 4 << 10)
                for index in 0..<40 {
                    try await cache.set(body, forKey: "key \(index)", metadata: Data())
                }
                let usage = try await cache.usage()
                #expect(usage.bytes <= 64 << 10)
                #expect(usage.entries >= 12)
                #expect(try await cache.entry(forKey: "key 0") == nil)
                #expect(try await cache.entry(forKey: "key 39") != nil)
                #expect(cache.statistics.trimmed == 40 - usage.entries)
                // The counts the trigger keeps are the table's.
                let counted = try await cluster.sql("SELECT count(*), sum(size) FROM cachalot_entries")
                #expect(counted == "\(usage.entries)|\(usage.bytes)\n")
            }
        }
    }

    /// A set does not read the table's size; each writer re-reads it after every 64th of the
    /// limit it writes, so that two writers take the table at most about a 64th over the limit
    /// each (with only the trim every 64 writes, each could add 64 entries unseen by the other).
    @Test func twoWritersKeepTheTableWithinAFewSixtyFourthsOfItsLimit() async throws {
        try await PostgresCluster.with { cluster in
            var configuration = PostgresCache.Configuration.testing([cluster.database()])
            configuration.maximumSize = 640 << 10
            configuration.trimBatchSize = 4
            let first = try PostgresCache(configuration: configuration)
            let second = try PostgresCache(configuration: configuration)
            try await running(first) {
                try await running(second) {
                    let body = Data(repeating: 7, count: 1 << 10)
                    for index in 0..<500 { try await first.set(body, forKey: "a \(index)", metadata: Data()) }
                    let allowed = configuration.maximumSize + 2 * (configuration.maximumSize / 64 + 2 << 10)
                    var largest = 0
                    for index in 500..<900 {
                        try await first.set(body, forKey: "a \(index)", metadata: Data())
                        try await second.set(body, forKey: "b \(index)", metadata: Data())
                        largest = max(largest, try await first.usage().bytes)
                    }
                    #expect(largest > configuration.maximumSize, "the writers never took the table over its limit")
                    #expect(largest <= allowed)
                    // The counts the trigger keeps are the table's.
                    let usage = try await first.usage()
                    let counted = try await cluster.sql("SELECT count(*), sum(size) FROM cachalot_entries")
                    #expect(counted == "\(usage.entries)|\(usage.bytes)\n")
                }
            }
        }
    }

    @Test func anEntryOlderThanTheAgeLimitReadsAsAMissAndIsRemoved() async throws {
        try await PostgresCluster.with { cluster in
            let clock = ManualWallClock()
            var configuration = PostgresCache.Configuration.testing([cluster.database()])
            configuration.maximumAge = .seconds(3600)
            let cache = try PostgresCache(configuration: configuration, now: { clock.now })
            try await running(cache) {
                try await cache.set(Data("old".utf8), forKey: "old", metadata: Data())
                clock.advance(by: 3000)
                try await cache.set(Data("young".utf8), forKey: "young", metadata: Data())
                clock.advance(by: 601)
                #expect(try await cache.entry(forKey: "old") == nil)
                #expect(try await cache.entry(forKey: "young") != nil)
                #expect(try await cache.usage().entries == 1)
            }
        }
    }

    @Test func trimsRemoveExpiredEntriesAmongTheOldestAsWritesGoOn() async throws {
        try await PostgresCluster.with { cluster in
            let clock = ManualWallClock()
            var configuration = PostgresCache.Configuration.testing([cluster.database()])
            configuration.maximumAge = .seconds(60)
            let cache = try PostgresCache(configuration: configuration, now: { clock.now })
            try await running(cache) {
                for index in 0..<10 { try await cache.set(Data(), forKey: "expiring \(index)", metadata: Data()) }
                clock.advance(by: 61)
                // An age trim comes every 64 writes.
                for index in 0..<54 { try await cache.set(Data(), forKey: "fresh \(index)", metadata: Data()) }
                #expect(try await cache.usage().entries == 54)
                #expect(cache.statistics.trimmed == 10)
            }
        }
    }

    @Test func keysSpreadOverTheDatabasesAndAThirdDatabaseTakesAboutAThirdOfThem() async throws {
        try await PostgresCluster.with { cluster in
            for name in ["one", "two", "three"] { try await cluster.createDatabase(name) }
            let two = try PostgresCache(configuration: .testing([cluster.database("one"), cluster.database("two")]))
            let keys = (0..<300).map { "https://example.com/\($0)" }
            try await running(two) {
                for key in keys { try await two.set(Data(key.utf8), forKey: key, metadata: Data()) }
            }
            let inOne = Int(try await cluster.sql("SELECT count(*) FROM cachalot_entries", in: "one").dropLast()) ?? -1
            let inTwo = Int(try await cluster.sql("SELECT count(*) FROM cachalot_entries", in: "two").dropLast()) ?? -1
            #expect(inOne + inTwo == 300)
            #expect((100...200).contains(inOne), "one holds \(inOne) of 300")

            let three = try PostgresCache(
                configuration: .testing([cluster.database("one"), cluster.database("two"), cluster.database("three")])
            )
            try await running(three) {
                var found = 0
                for key in keys {
                    let before = two.database(forKey: key)
                    let after = three.database(forKey: key)
                    // A key moves only to the new database, never between the old ones.
                    #expect(after == before || after == cluster.database("three"))
                    if try await three.entry(forKey: key) != nil { found += 1 }
                }
                #expect((150...250).contains(found), "\(found) of 300 keys stayed where they were")
            }
        }
    }
}
