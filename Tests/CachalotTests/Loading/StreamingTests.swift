import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

/// `stream` hands bodies over as they arrive and stores them on the way only while they may be
/// stored: a body that can never be stored is never written to disk.
@Suite("ResourceLoader.stream", .timeLimit(.minutes(1)))
struct StreamingTests {
    let clock = ManualWallClock()
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    /// A loader whose disk tier holds 20 MB, so that its largest entry is 1 MB.
    func makeLoader(_ configuration: ResourceLoader.Configuration = .init()) throws -> ResourceLoader {
        let clock = self.clock
        return try ResourceLoader(
            configuration: configuration,
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(
                directory: self.directory.url,
                configuration: .init(sizeLimit: 20_000_000),
                now: { clock.now }
            ),
            now: { clock.now }
        )
    }

    /// The bytes in the disk tier's temporary files now.
    var spooledBytes: Int {
        let directory = self.directory.path + "/tmp"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.reduce(0) { total, name in
            let size = (try? FileManager.default.attributesOfItem(atPath: "\(directory)/\(name)")[.size] as? Int) ?? 0
            return total + size
        }
    }

    func offline(_ url: URL) async throws -> Resource {
        try await self.makeLoader(.init(policy: .returnCacheDataDontLoad)).load(url)
    }

    @Test("a body without end is handed over as it comes; no more than the largest entry is ever spooled")
    func endlessBody() async throws {
        let piece = Data(repeating: 0x61, count: 65_536)
        let origin = try await RawOrigin.start { _ in
            .init(
                bytes: Data("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nConnection: close\r\n\r\n".utf8),
                repeating: (piece, 1_000_000)
            )
        }
        defer { origin.stop() }
        let loader = try self.makeLoader(.init(streamingThreshold: 256 << 10))
        let answer = try await loader.stream(HTTPRequest(method: .get, url: origin.url("/endless")))
        #expect(answer.source == .network)
        var received = 0
        var mostSpooled = 0
        for try await chunk in answer.body {
            received += chunk.count
            mostSpooled = max(mostSpooled, self.spooledBytes)
            if received >= 40 << 20 { break }
        }
        #expect(received >= 40 << 20)
        // Storing went to a file past the threshold, and stopped at the largest entry (1 MB).
        #expect(mostSpooled > 0)
        #expect(mostSpooled <= 1_000_000)
        #expect(self.spooledBytes == 0)
        origin.stop()
        await loader.waitForBackgroundWork()
        #expect(try await self.offline(origin.url("/endless")).response.status.code == 504)
    }

    @Test("a Content-Length over the largest entry is refused storage up front, and the body streams whole")
    func announcedTooLarge() async throws {
        let body = Data((0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], data: body) }
        defer { origin.stop() }
        let loader = try self.makeLoader(.init(streamingThreshold: 64 << 10))
        let answer = try await loader.stream(HTTPRequest(method: .get, url: origin.url("/big")))
        var received = Data()
        var mostSpooled = 0
        for try await chunk in answer.body {
            received.append(chunk)
            mostSpooled = max(mostSpooled, self.spooledBytes)
        }
        #expect(received == body)
        #expect(mostSpooled == 0)
        await loader.waitForBackgroundWork()
        #expect(try await self.offline(origin.url("/big")).response.status.code == 504)
    }

    @Test(
        "a storable body is stored as it passes, in memory when small and in a file when large",
        arguments: [10_000, 600_000]
    )
    func storedOnTheWay(size: Int) async throws {
        let body = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], data: body) }
        defer { origin.stop() }
        let loader = try self.makeLoader(.init(streamingThreshold: 64 << 10))
        let answer = try await loader.stream(HTTPRequest(method: .get, url: origin.url("/s")))
        var received = Data()
        for try await chunk in answer.body { received.append(chunk) }
        #expect(received == body)
        await loader.waitForBackgroundWork()
        #expect(try await self.offline(origin.url("/s")).body == body)
        let hit = try await loader.stream(HTTPRequest(method: .get, url: origin.url("/s")))
        #expect(hit.source != .network)
        var again = Data()
        for try await chunk in hit.body { again.append(chunk) }
        #expect(again == body)
        #expect(origin.requests.count == 1)
    }

    @Test("a body that ends short of its Content-Length fails the read and is not stored")
    func shortBody() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=600")], data: Data(count: 100_000), truncatedAfter: 50_000)
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let answer = try await loader.stream(HTTPRequest(method: .get, url: origin.url("/short")))
        await #expect(throws: LoadError.self) {
            for try await _ in answer.body {}
        }
        await loader.waitForBackgroundWork()
        #expect(try await self.offline(origin.url("/short")).response.status.code == 504)
    }

    @Test("a streamed load follows redirects, and each hop is stored under its own URL")
    func redirects() async throws {
        let origin = try await TestOrigin.start { request in
            request.path == "/old"
                ? .init(status: 301, fields: [("Location", "/new"), ("Cache-Control", "max-age=600")])
                : .init(fields: [("Cache-Control", "max-age=600")], body: "new")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let answer = try await loader.stream(HTTPRequest(method: .get, url: origin.url("/old")))
        var received = Data()
        for try await chunk in answer.body { received.append(chunk) }
        #expect(received == Data("new".utf8))
        #expect(answer.redirects == [origin.url("/new")])
        await loader.waitForBackgroundWork()
        #expect(try await self.offline(origin.url("/new")).body == Data("new".utf8))
    }
}
