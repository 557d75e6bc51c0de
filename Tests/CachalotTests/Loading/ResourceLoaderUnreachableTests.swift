import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing

@testable import Cachalot

@Suite("ResourceLoader: stale answers when the origin cannot be reached", .timeLimit(.minutes(1)))
struct ResourceLoaderUnreachableTests {
    let clock = ManualWallClock()

    func makeLoader(_ rules: CacheRules, transport: any HTTPTransport) throws -> ResourceLoader {
        let clock = self.clock
        return try ResourceLoader(
            configuration: .init(rules: rules),
            transport: transport,
            disk: nil,
            now: { clock.now }
        )
    }

    @Test("with the setting, a transport failure is answered stale; a 5xx and a must-revalidate response are not")
    func unreachable() async throws {
        let origin = try await TestOrigin.start { request in
            let revalidate = request.path?.hasPrefix("/m") == true ? ", must-revalidate" : ""
            return .init(fields: [("Cache-Control", "max-age=10" + revalidate)], body: "kept")
        }
        defer { origin.stop() }
        let transport = SwitchableTransport(AsyncHTTPClientTransport())
        let loader = try self.makeLoader(CacheRules(isStaleIfUnreachableEnabled: true), transport: transport)
        let plain = try self.makeLoader(.privateCache, transport: transport)
        for loader in [loader, plain] {
            _ = try await loader.load(origin.url("/s"))
            _ = try await loader.load(origin.url("/m"))
        }
        self.clock.advance(by: 1_000)
        transport.isUnreachable.withLock { $0 = true }
        let served = try await loader.load(origin.url("/s"))
        #expect(served.source == .stale(.unreachable) && served.body == Data("kept".utf8))
        await #expect(throws: LoadError.self) { try await loader.load(origin.url("/m")) }
        await #expect(throws: LoadError.self) { try await plain.load(origin.url("/s")) }
        // A server error is no transport failure: answered as it is.
        transport.isUnreachable.withLock { $0 = false }
        origin.respond { _ in .init(status: 503, body: "down") }
        #expect(try await loader.load(origin.url("/s")).response.status.code == 503)
        await loader.waitForBackgroundWork()
        await plain.waitForBackgroundWork()
    }
}
