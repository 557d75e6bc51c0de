import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

/// Identical streamed loads share one request to the origin, and read its body as it arrives.
@Suite("ResourceLoader.stream collapses identical requests", .timeLimit(.minutes(1)))
struct CollapsedStreamingTests {
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func makeLoader() throws -> ResourceLoader {
        try ResourceLoader(
            configuration: .init(rules: .sharedCache, memoryCostLimit: 0),
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: self.directory.url, configuration: .init(sizeLimit: 20_000_000))
        )
    }

    static func read(_ stream: ResourceStream) async throws -> Data {
        var body = Data()
        for try await piece in stream.body { body.append(piece) }
        return body
    }

    @Test("a load that arrives while the body is on its way reads it from its start, and the origin is asked once")
    func readsWhileWriting() async throws {
        let body = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0) })
        let halfway = Gate()
        let resume = Gate()
        let origin = try await TestOrigin.start { _ in
            var reply = TestOrigin.Reply(fields: [("Cache-Control", "max-age=60")], data: body)
            reply.pause = (
                after: 100_000,
                resume: {
                    halfway.open()
                    await resume.wait()
                }
            )
            return reply
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let first = try await loader.stream(HTTPRequest(method: .get, url: origin.url("/big")))
        await halfway.wait()
        // The origin has sent half and waits: the second load joins the answer in flight.
        let second = try await loader.stream(HTTPRequest(method: .get, url: origin.url("/big")))
        #expect(!first.isCollapsed)
        #expect(second.isCollapsed)
        #expect(second.response.status.code == 200)
        var iterator = second.body.makeAsyncIterator()
        var early = Data()
        while early.count < 100_000, let piece = try await iterator.next() { early.append(piece) }
        #expect(early == body.prefix(100_000))
        resume.open()
        while let piece = try await iterator.next() { early.append(piece) }
        #expect(early == body)
        #expect(try await Self.read(first) == body)
        #expect(origin.requests.count == 1)
        await loader.waitForBackgroundWork()
        let stored = try await loader.stream(HTTPRequest(method: .get, url: origin.url("/big")))
        #expect(stored.source == .disk)
    }

    @Test(
        "a reader that stops holds no more than a window in memory: the body is read from the origin and stored, and the reader gets all of it, from the file and then from memory"
    )
    func slowReaderHoldsAWindow() async throws {
        let size = 24 << 20
        let body = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 16) })
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=60")], data: body)
        }
        defer { origin.stop() }
        let loader = try ResourceLoader(
            configuration: .init(rules: .sharedCache, memoryCostLimit: 0, maximumEntrySize: 32 << 20),
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: self.directory.url, configuration: .init(sizeLimit: 128 << 20))
        )
        let url = origin.url("/large")
        let slow = try await loader.stream(HTTPRequest(method: .get, url: url))
        let flight = try #require(loader.sharedResponse(url))
        var iterator = slow.body.makeAsyncIterator()
        var received = try #require(try await iterator.next())
        // The reader stops; the body goes on arriving, into the file, until it is whole.
        while loader.sharedResponse(url) != nil, !Task.isCancelled { await Task.yield() }
        #expect(flight.heldBytes <= SharedResponse.window + (1 << 20), "\(flight.heldBytes)")
        await loader.waitForBackgroundWork()
        let stored = try await loader.stream(HTTPRequest(method: .get, url: url))
        #expect(stored.source == .disk)
        #expect(try await Self.read(stored) == body)
        while let piece = try await iterator.next() { received.append(piece) }
        #expect(received.count == body.count)
        #expect(received == body)
        #expect(origin.requests.count == 1)
    }

    @Test(
        "past the loader's budget of bodies in memory, a shared body under the streaming threshold goes to its file, and a reader that stops holds none of it in memory",
        arguments: [nil, 0] as [Int?]
    )
    func budgetMovesBodiesToTheirFile(limit: Int?) async throws {
        let size = 4 << 20
        let body = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 12) })
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=60")], data: body)
        }
        defer { origin.stop() }
        let loader = try ResourceLoader(
            configuration: .init(
                rules: .sharedCache,
                memoryCostLimit: 0,
                maximumEntrySize: 32 << 20,
                streamingThreshold: 16 << 20,
                inFlightBodyLimit: limit
            ),
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: self.directory.url, configuration: .init(sizeLimit: 128 << 20))
        )
        let url = origin.url("/budget")
        let slow = try await loader.stream(HTTPRequest(method: .get, url: url))
        let flight = try #require(loader.sharedResponse(url))
        var iterator = slow.body.makeAsyncIterator()
        var received = try #require(try await iterator.next())
        // The reader stops; the body goes on arriving until it is whole.
        while loader.sharedResponse(url) != nil, !Task.isCancelled { await Task.yield() }
        // Without a limit a body under the threshold is held whole; past it, none of what is in
        // its file is.
        #expect(flight.heldBytes == (limit == nil ? size : 0), "\(flight.heldBytes)")
        #expect(loader.bodies.bytes == flight.heldBytes)
        while let piece = try await iterator.next() { received.append(piece) }
        #expect(received == body)
        await loader.waitForBackgroundWork()
        let stored = try await loader.stream(HTTPRequest(method: .get, url: url))
        #expect(stored.source == .disk)
        #expect(try await Self.read(stored) == body)
        #expect(origin.requests.count == 1)
    }

    @Test("loads that wait for the head of the same request share it")
    func sharesTheHead() async throws {
        let gate = Gate()
        let origin = try await TestOrigin.start { _ in
            await gate.wait()
            return .init(fields: [("Cache-Control", "max-age=60")], body: "shared")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        async let first = loader.stream(HTTPRequest(method: .get, url: origin.url("/s")))
        while origin.requests.isEmpty, !Task.isCancelled { await Task.yield() }
        async let second = loader.stream(HTTPRequest(method: .get, url: origin.url("/s")))
        // The first is at the origin; the second waits for its head.
        while loader.callersOfStreamedFlight(origin.url("/s")) < 2, origin.requests.count < 2 {
            await Task.yield()
        }
        gate.open()
        let streams = try await [first, second]
        #expect(streams.filter(\.isCollapsed).count == 1)
        for stream in streams { #expect(try await Self.read(stream) == Data("shared".utf8)) }
        #expect(origin.requests.count == 1)
        await loader.waitForBackgroundWork()
    }

    @Test(
        "a load that is cancelled while it waits for the head leaves the others waiting for it: the origin is asked once"
    )
    func firstCallerCancels() async throws {
        let gate = Gate()
        let origin = try await TestOrigin.start { _ in
            await gate.waitIgnoringCancellation()
            return .init(fields: [("Cache-Control", "max-age=60")], body: "shared")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let url = origin.url("/c")
        let first = Task { try await loader.stream(HTTPRequest(method: .get, url: url)) }
        while origin.requests.isEmpty, !Task.isCancelled { await Task.yield() }
        let second = Task { try await loader.stream(HTTPRequest(method: .get, url: url)) }
        while loader.callersOfStreamedFlight(url) < 2, origin.requests.count < 2, !Task.isCancelled {
            await Task.yield()
        }
        first.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        gate.open()
        let stream = try await second.value
        #expect(stream.isCollapsed)
        #expect(try await Self.read(stream) == Data("shared".utf8))
        #expect(origin.requests.count == 1)
        await loader.waitForBackgroundWork()
    }

    @Test("a response that varies on a field the waiting load sends differently is not shared with it")
    func varyMismatch() async throws {
        let gate = Gate()
        let origin = try await TestOrigin.start { request in
            await gate.wait()
            return .init(
                fields: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                body: request.headerFields[.acceptLanguage] ?? "none"
            )
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        var french = HTTPRequest(method: .get, url: origin.url("/v"))
        french.headerFields[.acceptLanguage] = "fr"
        var german = french
        german.headerFields[.acceptLanguage] = "de"
        async let first = loader.stream(french)
        while origin.requests.isEmpty, !Task.isCancelled { await Task.yield() }
        async let second = loader.stream(german)
        while loader.callersOfStreamedFlight(origin.url("/v")) < 2, origin.requests.count < 2 {
            await Task.yield()
        }
        gate.open()
        #expect(try await Self.read(try await first) == Data("fr".utf8))
        let other = try await second
        #expect(!other.isCollapsed)
        #expect(try await Self.read(other) == Data("de".utf8))
        #expect(origin.requests.count == 2)
        await loader.waitForBackgroundWork()
    }

    @Test("a response that is stale at once, or not stored, is not shared: the waiting load asks itself")
    func notSharedUnlessFresh() async throws {
        for cacheControl in ["max-age=0", "no-store"] {
            let gate = Gate()
            let origin = try await TestOrigin.start { _ in
                await gate.wait()
                return .init(fields: [("Cache-Control", cacheControl)], body: "own")
            }
            let loader = try self.makeLoader()
            async let first = loader.stream(HTTPRequest(method: .get, url: origin.url("/n")))
            while origin.requests.isEmpty, !Task.isCancelled { await Task.yield() }
            async let second = loader.stream(HTTPRequest(method: .get, url: origin.url("/n")))
            while loader.callersOfStreamedFlight(origin.url("/n")) < 2, origin.requests.count < 2 {
                await Task.yield()
            }
            gate.open()
            for stream in try await [first, second] {
                #expect(!stream.isCollapsed)
                #expect(try await Self.read(stream) == Data("own".utf8))
            }
            #expect(origin.requests.count == 2, "\(cacheControl)")
            await loader.waitForBackgroundWork()
            origin.stop()
        }
    }
}
