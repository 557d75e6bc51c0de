import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("Prefetch against a real origin on 127.0.0.1", .timeLimit(.minutes(1)))
struct PrefetchTests {
    /// An origin whose answers wait at a gate, except for "/free"; and a loader allowed one
    /// request at a time to it, whose only slot a load of "/blocker" holds.
    func blockedOrigin() async throws -> (TestOrigin, ResourceLoader, Gate, Task<Resource, any Error>, String) {
        let gate = Gate()
        let arrived = Countdown()
        let origin = try await TestOrigin.start { request in
            arrived.increment()
            if request.path != "/free" { await gate.wait() }
            return .init(fields: [("Cache-Control", "max-age=60")], body: request.path ?? "")
        }
        let loader = try ResourceLoader(
            configuration: .init(maximumConnectionsPerHost: 1),
            transport: AsyncHTTPClientTransport()
        )
        let blocker = Task { try await loader.load(origin.url("/blocker")) }
        await arrived.wait(for: 1)
        return (origin, loader, gate, blocker, "127.0.0.1:\(origin.port)")
    }

    @Test("prefetched URLs load into the cache, and a later load is a memory hit")
    func loadsIntoTheCache() async throws {
        let origin = try await TestOrigin.start { request in
            .init(fields: [("Cache-Control", "max-age=60")], body: request.path ?? "")
        }
        defer { origin.stop() }
        let loader = try ResourceLoader(transport: AsyncHTTPClientTransport())
        let prefetch = loader.prefetch([origin.url("/a"), origin.url("/b"), origin.url("/a")])
        await prefetch.wait()
        #expect(try await loader.load(origin.url("/b")).source == .memory)
        #expect(origin.requests.count == 2)
    }

    @Test("a priority raised while waiting sends that load first")
    func raisedPriority() async throws {
        let (origin, loader, gate, blocker, host) = try await self.blockedOrigin()
        defer { origin.stop() }
        let prefetch = loader.prefetch([origin.url("/first"), origin.url("/second")])
        while loader.hosts.waiting(for: host) < 2, !Task.isCancelled { await Task.yield() }
        prefetch.setPriority(.high, for: origin.url("/second"))
        gate.open()
        _ = try await blocker.value
        await prefetch.wait()
        #expect(origin.requests.map(\.path) == ["/blocker", "/second", "/first"])
    }

    @Test("cancelling one URL, or the whole prefetch, sends nothing for what was cancelled")
    func cancellation() async throws {
        let (origin, loader, gate, blocker, host) = try await self.blockedOrigin()
        defer { origin.stop() }
        let some = loader.prefetch([origin.url("/kept"), origin.url("/dropped")])
        let all = loader.prefetch([origin.url("/gone-1"), origin.url("/gone-2")])
        while loader.hosts.waiting(for: host) < 4, !Task.isCancelled { await Task.yield() }
        some.cancel(origin.url("/dropped"))
        all.cancel()
        while loader.hosts.waiting(for: host) > 1, !Task.isCancelled { await Task.yield() }
        gate.open()
        _ = try await blocker.value
        await some.wait()
        await all.wait()
        #expect(origin.requests.map(\.path) == ["/blocker", "/kept"])
    }
}
