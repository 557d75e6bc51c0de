import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import CachalotURLSession
import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("Large bodies go to disk as they arrive", .timeLimit(.minutes(1)))
struct LargeBodyTests {
    let directory: TemporaryDirectory
    let body = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func makeLoader(
        threshold: Int = 64 << 10,
        transport: any HTTPTransport = AsyncHTTPClientTransport()
    ) throws -> (ResourceLoader, DiskCache) {
        let disk = try DiskCache(directory: self.directory.url)
        return (
            try ResourceLoader(configuration: .init(streamingThreshold: threshold), transport: transport, disk: disk),
            disk
        )
    }

    /// Whether `data`'s bytes lie in a mapping of a file under the cache directory: then they
    /// were not read into memory.
    func isMappedFromCache(_ data: Data) -> Bool {
        FileMappings.isMapped(data, fromUnder: self.directory.path)
    }

    @Test(
        "a body above the threshold is answered mapped from its file, stored, and whole, through either transport",
        arguments: [false, true]
    )
    func streamedAndStored(throughURLSession: Bool) async throws {
        let body = self.body
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], data: body) }
        defer { origin.stop() }
        let (loader, disk) = try self.makeLoader(
            transport: throughURLSession ? URLSessionTransport() : AsyncHTTPClientTransport()
        )
        let progress = Countdown()
        let first = try await loader.load(origin.url("/big"), progress: { _ in progress.increment() })
        #expect(first.source == .network)
        #expect(first.body == body)
        #expect(self.isMappedFromCache(first.body))
        #expect(progress.count > 1)
        let key = try #require(CacheKey.url(of: origin.url("/big")))
        #expect(try disk.data(forKey: key) == body)
        let again = try await loader.load(origin.url("/big"))
        #expect(again.source == .disk && again.body == body)
        #expect(origin.requests.count == 1)
    }

    @Test("a body without Content-Length switches to the file once it passes the threshold")
    func switchesMidway() async throws {
        let body = self.body
        let origin = try await TestOrigin.start { _ in
            var reply = TestOrigin.Reply(fields: [("Cache-Control", "max-age=60")], data: body)
            reply.isChunked = true
            return reply
        }
        defer { origin.stop() }
        let (loader, disk) = try self.makeLoader(threshold: 100_000)
        let resource = try await loader.load(origin.url("/growing"))
        #expect(resource.response.headerFields[.contentLength] == nil)
        #expect(resource.body == body)
        #expect(self.isMappedFromCache(resource.body))
        #expect(try disk.data(forKey: #require(CacheKey.url(of: origin.url("/growing")))) == body)
    }

    @Test("a large body that may not be stored is answered mapped, and leaves no file behind")
    func unstored() async throws {
        let body = self.body
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "no-store")], data: body) }
        defer { origin.stop() }
        let (loader, disk) = try self.makeLoader()
        let resource = try await loader.load(origin.url("/private"))
        #expect(resource.body == body)
        #expect(try disk.count == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: self.directory.path + "/tmp").isEmpty)
    }

    @Test("a truncated large body fails and leaves no file behind")
    func truncated() async throws {
        let body = self.body
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=60")], data: body, truncatedAfter: 200_000)
        }
        defer { origin.stop() }
        let (loader, disk) = try self.makeLoader()
        await #expect(throws: LoadError.self) { try await loader.load(origin.url("/cut")) }
        #expect(try disk.count == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: self.directory.path + "/tmp").isEmpty)
    }
}

extension LargeBodyTests {
    @Test("a load whose caller went is waited for: after waitForBackgroundWork no temporary file is left")
    func cancelledMidway() async throws {
        let transport = HeldTransport(first: self.body.prefix(100_000), length: self.body.count)
        let disk = try DiskCache(directory: self.directory.url)
        let loader = try ResourceLoader(
            configuration: .init(streamingThreshold: 64 << 10),
            transport: transport,
            disk: disk
        )
        let caller = Task { try await loader.load(URL(string: "https://example.com/held")!) }
        await transport.holding.wait()
        caller.cancel()
        // The caller is answered at once; the load it started is still writing its file.
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(try FileManager.default.contentsOfDirectory(atPath: self.directory.path + "/tmp").count == 1)
        transport.release.open()
        await loader.waitForBackgroundWork()
        #expect(try FileManager.default.contentsOfDirectory(atPath: self.directory.path + "/tmp").isEmpty)
        #expect(try disk.count == 0)
    }
}

/// A transport whose body sends its first piece, then holds, whether cancelled or not, until
/// `release` opens, and then breaks off: a load that takes its time to stop.
struct HeldTransport: HTTPTransport {
    let first: Data
    let length: Int
    /// Opens when the body holds: the first piece has been taken.
    let holding = Gate()
    let release = Gate()

    struct Body: AsyncSequence, Sendable {
        let transport: HeldTransport

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(transport: self.transport) }

        struct AsyncIterator: AsyncIteratorProtocol {
            let transport: HeldTransport
            var isFirst = true

            mutating func next() async throws -> Data? {
                if self.isFirst {
                    self.isFirst = false
                    return self.transport.first
                }
                self.transport.holding.open()
                await self.transport.release.waitIgnoringCancellation()
                throw CancellationError()
            }
        }
    }

    func send(_ request: HTTPRequest, body: Data?) async throws -> HTTPTransportResponse {
        var response = HTTPResponse(status: .ok)
        response.headerFields[.cacheControl] = "max-age=60"
        response.headerFields[.contentLength] = String(self.length)
        return HTTPTransportResponse(response: response, body: HTTPBody(Body(transport: self)) { $0 })
    }
}
