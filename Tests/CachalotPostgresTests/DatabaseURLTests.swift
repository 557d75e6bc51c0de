import Cachalot
import CachalotPostgres
import Testing

@Suite struct DatabaseURLTests {
    @Test func readsEveryPartWithLibpqsDefaults() throws {
        let full = try DatabaseURL("postgresql://cachalot:s%40cret@DB.internal:6432/cache?sslmode=require")
        #expect(full.host == "db.internal" || full.host == "DB.internal")
        #expect(full.port == 6432 && full.user == "cachalot" && full.password == "s@cret")
        #expect(full.database == "cache" && full.security == .require)
        #expect(full.description == "postgres://cachalot@\(full.host):6432/cache")

        let short = try DatabaseURL("postgres://me@localhost")
        #expect(short.port == 5432 && short.database == "me" && short.password == nil && short.security == .prefer)
        #expect(try DatabaseURL("postgres://me@h/db?sslmode=disable").security == .disable)
        #expect(try DatabaseURL("postgres://me@h/db?sslmode=verify-full").security == .verifyFull)
    }

    @Test(arguments: [
        "http://me@host/db", "postgres://host/db", "postgres://me@/db", "not a url", "postgres://me@h/db?sslmode=maybe",
    ])
    func refusesWhatIsNotADatabaseURL(_ text: String) throws {
        let error = #expect(throws: CacheError.self) { try DatabaseURL(text) }
        #expect(error?.code == .invalidConfiguration)
    }

    @Test func leavesThePasswordOutOfErrors() throws {
        let error = #expect(throws: CacheError.self) { try DatabaseURL("postgres://me:hunter2@h/db?sslmode=maybe") }
        #expect(error?.message.contains("hunter2") == false)
    }
}
