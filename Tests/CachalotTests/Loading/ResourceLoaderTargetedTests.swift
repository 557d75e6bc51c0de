import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("ResourceLoader with a target list (RFC 9213)", .timeLimit(.minutes(1)))
struct ResourceLoaderTargetedTests {
    let clock = ManualWallClock()
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func makeLoader(_ rules: CacheRules) throws -> ResourceLoader {
        let clock = self.clock
        return try ResourceLoader(
            configuration: .init(rules: rules),
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: self.directory.url, now: { clock.now }),
            now: { clock.now }
        )
    }

    @Test("the loader stores and reuses by the targeted field, and relays Cache-Control as it came")
    func targeted() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60")], body: "hello")
        }
        defer { origin.stop() }
        let cdn = try #require(HTTPField.Name("CDN-Cache-Control"))
        let loader = try self.makeLoader(CacheRules(isShared: true, targetedFields: [cdn]))
        #expect(try await loader.load(origin.url("/t")).source == .network)
        self.clock.advance(by: 30)
        let hit = try await loader.load(origin.url("/t"))
        #expect(hit.source == .memory)
        #expect(hit.response.headerFields[.cacheControl] == "no-store")
        await loader.waitForBackgroundWork()
        // A new loader reads the stored facts from disk.
        let other = try self.makeLoader(CacheRules(isShared: true, targetedFields: [cdn]))
        #expect(try await other.load(origin.url("/t")).source == .disk)
        self.clock.advance(by: 31)
        #expect(try await other.load(origin.url("/t")).source == .network)
        #expect(origin.requests.count == 2)
        await other.waitForBackgroundWork()

        // Without the list, no-store holds.
        let plain = try self.makeLoader(.sharedCache)
        #expect(try await plain.load(origin.url("/u")).source == .network)
        #expect(try await plain.load(origin.url("/u")).source == .network)
        await plain.waitForBackgroundWork()
    }
}
