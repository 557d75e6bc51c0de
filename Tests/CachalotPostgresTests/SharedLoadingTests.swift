import Cachalot
import CachalotAsyncHTTPClient
import CachalotPostgres
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Logging
import Synchronization
import Testing

/// Loaders on separate machines, as it were (each with its own disk directory), sharing one
/// PostgreSQL database, against a real origin.
@Suite(.enabled(if: PostgresCluster.isAvailable, "needs PostgreSQL"), .timeLimit(.minutes(2)))
struct SharedLoadingTests {
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func makeLoader(_ name: String, shared: PostgresCache) throws -> ResourceLoader {
        try ResourceLoader(
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: self.directory.url.appending(path: name)),
            shared: [shared]
        )
    }

    @Test func aSecondLoaderWithItsOwnDiskGetsWhatTheFirstLoadedFromTheDatabaseNotTheOrigin() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], body: "hello")
        }
        defer { origin.stop() }
        try await PostgresCluster.with { cluster in
            let shared = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(shared) {
                let first = try self.makeLoader("first", shared: shared)
                #expect(try await first.load(origin.url("/a")).source == .network)
                await first.waitForBackgroundWork()

                let second = try self.makeLoader("second", shared: shared)
                let answer = try await second.load(origin.url("/a"))
                #expect(answer.source == .shared)
                #expect(answer.body == Data("hello".utf8))
                #expect(try await second.load(origin.url("/a")).source == .memory)
                await second.waitForBackgroundWork()
                #expect(origin.requests.count == 1)
                #expect(shared.statistics.hits == 1)
            }
        }
    }

    @Test func varyVariantsAndInvalidationsAreSeenByBothLoaders() async throws {
        let origin = try await TestOrigin.start { request in
            let language = request.headerFields[HTTPField.Name("Accept-Language")!] ?? "none"
            return .init(
                fields: [("Cache-Control", "max-age=600"), ("Vary", "Accept-Language")],
                body: "in \(language)"
            )
        }
        defer { origin.stop() }
        func request(_ language: String) -> HTTPRequest {
            var request = HTTPRequest(method: .get, url: origin.url("/greeting"))
            request.headerFields[HTTPField.Name("Accept-Language")!] = language
            return request
        }
        try await PostgresCluster.with { cluster in
            let shared = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(shared) {
                let first = try self.makeLoader("first", shared: shared)
                _ = try await first.load(request("en"))
                _ = try await first.load(request("fr"))
                await first.waitForBackgroundWork()

                let second = try self.makeLoader("second", shared: shared)
                let french = try await second.load(request("fr"))
                #expect(french.source == .shared)
                #expect(french.body == Data("in fr".utf8))
                #expect(try await second.load(request("de")).source == .network)
                #expect(origin.requests.count == 3)

                // The second loader's POST invalidates the URL in the database: a third loader
                // finds nothing there.
                _ = try await second.load(HTTPRequest(method: .post, url: origin.url("/greeting")))
                await second.waitForBackgroundWork()
                let third = try self.makeLoader("third", shared: shared)
                #expect(try await third.load(request("en")).source == .network)
                await third.waitForBackgroundWork()
            }
        }
    }

    @Test func purgesByTagURLAndPrefixReachTheDatabaseFromALoaderThatNeverStoredThem() async throws {
        let origin = try await TestOrigin.start { request in
            var fields = [("Cache-Control", "max-age=600")]
            if request.path?.hasPrefix("/news/") == true { fields.append(("Surrogate-Key", "news front")) }
            if request.path == "/sports" { fields.append(("Cache-Tag", "sports, front")) }
            if request.path == "/greeting" { fields.append(("Vary", "Accept-Language")) }
            return .init(fields: fields, body: "at \(request.path ?? "")")
        }
        defer { origin.stop() }
        try await PostgresCluster.with { cluster in
            let shared = try PostgresCache(configuration: .testing([cluster.database()]))
            try await running(shared) {
                let first = try self.makeLoader("first", shared: shared)
                for path in ["/news/1", "/news/2", "/sports", "/greeting", "/docs/a", "/docs/b", "/other"] {
                    _ = try await first.load(origin.url(path))
                }
                await first.waitForBackgroundWork()
                // A loader whose own tiers are empty removes only what the database holds.
                let purger = try self.makeLoader("purger", shared: shared)
                #expect(try await purger.removeResponses(taggedWith: "front") == 3)
                #expect(try await purger.removeResponses(taggedWith: "news") == 0)
                // The URL and its variant (its list of variants, and the variant for no language).
                #expect(try await purger.removeResponses(for: origin.url("/greeting")) == 2)
                let prefix = origin.url("/docs/").absoluteString
                #expect(try await purger.removeResponses(withPrefix: prefix) == 2)
                let third = try self.makeLoader("third", shared: shared)
                for path in ["/news/1", "/sports", "/greeting", "/docs/b"] {
                    #expect(try await third.load(origin.url(path)).source == .network, "\(path)")
                }
                #expect(try await third.load(origin.url("/other")).source == .shared)
                await third.waitForBackgroundWork()
            }
        }
    }

    @Test func aBodySpooledToDiskReachesTheDatabaseOnceWholeWithinItsRowLimit() async throws {
        let large = Data((0..<(3 << 20)).map { UInt8($0 % 251) })
        let origin = try await TestOrigin.start { request in
            .init(
                fields: [("Cache-Control", "max-age=600")],
                data: request.path == "/small" ? large.prefix(1 << 20) : large
            )
        }
        defer { origin.stop() }
        try await PostgresCluster.with { cluster in
            var configuration = PostgresCache.Configuration.testing([cluster.database()])
            configuration.maximumEntrySize = 2 << 20
            let shared = try PostgresCache(configuration: configuration)
            try await running(shared) {
                // Bodies over 512 KiB are written to the disk as they arrive.
                let spooling = ResourceLoader.Configuration(streamingThreshold: 512 << 10)
                let first = try ResourceLoader(
                    configuration: spooling,
                    transport: AsyncHTTPClientTransport(),
                    disk: DiskCache(directory: self.directory.url.appending(path: "first")),
                    shared: [shared]
                )
                _ = try await first.load(origin.url("/small"))
                _ = try await first.load(origin.url("/large"))
                await first.waitForBackgroundWork()
                #expect(first.statistics.sharedStorageFailures == 0)
                let second = try self.makeLoader("second", shared: shared)
                let small = try await second.load(origin.url("/small"))
                #expect(small.source == .shared && small.body == large.prefix(1 << 20))
                // Over the row limit: not written, so not found.
                #expect(try await second.load(origin.url("/large")).source == .network)
                await second.waitForBackgroundWork()
                #expect(origin.requests.count == 3)
            }
        }
    }

    @Test func theDatabaseStoppedMidRunCostsNothingButItsHitsAndComesBackByItself() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], body: "hello")
        }
        defer { origin.stop() }
        let logs = WarningCounter()
        try await PostgresCluster.with { cluster in
            var configuration = PostgresCache.Configuration.testing([cluster.database()])
            configuration.readTimeout = .milliseconds(500)
            let shared = try PostgresCache(configuration: configuration, logger: logs.logger)
            try await running(shared) {
                let loader = try self.makeLoader("first", shared: shared)
                _ = try await loader.load(origin.url("/before"))
                await loader.waitForBackgroundWork()

                try await cluster.stop()
                for path in ["/during-1", "/during-2", "/during-3"] {
                    let answer = try await loader.load(origin.url(path))
                    #expect(answer.source == .network)
                    #expect(answer.body == Data("hello".utf8))
                }
                await loader.waitForBackgroundWork()
                #expect(shared.statistics.outages == 1)
                #expect(shared.statistics.failures >= 3)
                #expect(logs.warnings == 1)

                try await cluster.start()
                // The pool reconnects by itself, after its backoff (100 ms, growing by a quarter
                // each failed attempt): wait for it, boundedly, then use the tier.
                var isBack = false
                for _ in 0..<20 where !isBack {
                    isBack = (try? await shared.prepare()) != nil
                }
                #expect(isBack)
                _ = try await loader.load(origin.url("/after"))
                await loader.waitForBackgroundWork()
                let other = try self.makeLoader("second", shared: shared)
                #expect(try await other.load(origin.url("/after")).source == .shared)
                #expect(try await other.load(origin.url("/before")).source == .shared)
                await other.waitForBackgroundWork()
                #expect(shared.statistics.outages == 1)
                #expect(logs.infos == 1)
            }
        }
    }
}

/// Counts the warnings and informational messages a logger is given.
final class WarningCounter: Sendable {
    private let counts = Mutex((warnings: 0, infos: 0))

    var warnings: Int { self.counts.withLock { $0.warnings } }
    var infos: Int { self.counts.withLock { $0.infos } }

    var logger: Logger {
        Logger(label: "test") { _ in Handler(counter: self) }
    }

    private struct Handler: LogHandler {
        let counter: WarningCounter
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { self.metadata[key] }
            set { self.metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            self.counter.counts.withLock { counts in
                if event.level == .warning { counts.warnings += 1 }
                if event.level == .info { counts.infos += 1 }
            }
        }
    }
}
