import AsyncHTTPClient
import CachalotAsyncHTTPClient
import CachalotNIO
import CachalotTestOrigin
import CachalotTesting
import CachalotURLSession
import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("Transports against a real origin on 127.0.0.1", .timeLimit(.minutes(1)))
struct TransportTests {
    static let transports: [@Sendable () -> any HTTPTransport] = [
        { AsyncHTTPClientTransport() }, { URLSessionTransport() }, { NIOTransport() },
    ]

    @Test(
        "each transport sends the method, fields and body, and returns status, fields and body",
        arguments: [0, 1, 2]
    )
    func roundTrip(transport: Int) async throws {
        let origin = try await TestOrigin.start { request in
            .init(
                status: 201,
                fields: [("X-Seen", request.headerFields[HTTPField.Name("X-Sent")!] ?? "")],
                body: "made"
            )
        }
        defer { origin.stop() }
        var request = HTTPRequest(method: .post, url: origin.url("/things?a=1"))
        request.headerFields[HTTPField.Name("X-Sent")!] = "yes"
        let reply = try await Self.transports[transport]().send(request, body: Data("payload".utf8))
        var body = Data()
        for try await piece in reply.body { body.append(piece) }
        #expect(reply.response.status.code == 201)
        #expect(reply.response.headerFields[HTTPField.Name("X-Seen")!] == "yes")
        #expect(body == Data("made".utf8))
        #expect(origin.requests.first?.method == .post)
        #expect(origin.requests.first?.path == "/things?a=1")
    }

    @Test(
        "a compressed body comes with a head that describes it: as sent through AsyncHTTPClient and NIO, decoded through URLSession",
        arguments: [0, 1, 2]
    )
    func compressedBody(transport: Int) async throws {
        // "hello" gzipped, with its header's time zeroed.
        let gzipped = Data(
            [
                0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00,
                0x86, 0xa6, 0x10, 0x36, 0x05, 0x00, 0x00, 0x00,
            ]
        )
        let origin = try await TestOrigin.start { _ in .init(fields: [("Content-Encoding", "gzip")], data: gzipped) }
        defer { origin.stop() }
        let reply = try await Self.transports[transport]().send(HTTPRequest(url: origin.url("/z")), body: nil)
        var body = Data()
        for try await piece in reply.body { body.append(piece) }
        if transport != 1 {
            #expect(body == gzipped)
            #expect(reply.response.headerFields[.contentEncoding] == "gzip")
            #expect(reply.response.headerFields[.contentLength] == "\(gzipped.count)")
        } else {
            #expect(body == Data("hello".utf8))
            #expect(reply.response.headerFields[.contentEncoding] == nil)
            #expect(reply.response.headerFields[.contentLength] == nil)
        }
        let asked = origin.requests.first?.headerFields[.acceptEncoding]
        #expect(asked == nil || asked == "identity")
    }

    @Test(
        "each transport returns the head and the body's first pieces before the body has ended",
        arguments: [0, 1, 2]
    )
    func streamsTheBody(transport: Int) async throws {
        let origin = try await TestOrigin.start { _ in
            var reply = TestOrigin.Reply(data: Data(count: 200_000))
            // The origin sends a quarter of the body, then nothing until the client goes.
            reply.stall = (after: 50_000, reached: {})
            return reply
        }
        defer { origin.stop() }
        let request = HTTPRequest(method: .get, url: origin.url("/long"))
        let reply = try await Self.transports[transport]().send(request, body: nil)
        #expect(reply.response.headerFields[.contentLength] == "200000")
        var received = 0
        for try await piece in reply.body {
            received += piece.count
            if received >= 50_000 { break }
        }
        #expect(received == 50_000)
    }

    @Test("no transport caches: two identical requests both reach the origin", arguments: [0, 1, 2])
    func noCacheOfItsOwn(transport: Int) async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], body: "x") }
        defer { origin.stop() }
        let sender = Self.transports[transport]()
        for _ in 0..<2 {
            let reply = try await sender.send(HTTPRequest(method: .get, url: origin.url("/same")), body: nil)
            for try await _ in reply.body {}
        }
        #expect(origin.requests.count == 2)
    }

    @Test("a 304 reaches the loader as a 304, which freshens the stored response", arguments: [0, 1, 2])
    func notModifiedPassesThrough(transport: Int) async throws {
        let origin = try await TestOrigin.start { request in
            request.headerFields[.ifNoneMatch] == "\"t\""
                ? .init(status: 304, fields: [("ETag", "\"t\""), ("Cache-Control", "max-age=1")])
                : .init(fields: [("ETag", "\"t\""), ("Cache-Control", "max-age=1")], body: "kept")
        }
        defer { origin.stop() }
        let clock = ManualWallClock()
        let loader = try ResourceLoader(transport: Self.transports[transport](), now: { clock.now })
        _ = try await loader.load(origin.url("/v"))
        clock.advance(by: 5)
        let answer = try await loader.load(origin.url("/v"))
        #expect(answer.source == .revalidated && answer.body == Data("kept".utf8))
    }

    @Test("each transport hands the redirect itself to the loader instead of following it", arguments: [0, 1, 2])
    func redirectsNotFollowed(transport: Int) async throws {
        let origin = try await TestOrigin.start { request in
            request.path == "/from" ? .init(status: 302, fields: [("Location", "/to")]) : .init(body: "target")
        }
        defer { origin.stop() }
        let reply = try await Self.transports[transport]().send(
            HTTPRequest(method: .get, url: origin.url("/from")),
            body: nil
        )
        for try await _ in reply.body {}
        #expect(reply.response.status.code == 302)
        #expect(origin.requests.map(\.path) == ["/from"])
    }

    @Test("a body that stalls fails once the client's idle timeout passes without a byte")
    func idleBodyTimesOut() async throws {
        let origin = try await TestOrigin.start { _ in
            var reply = TestOrigin.Reply(data: Data(count: 200_000))
            reply.stall = (after: 50_000, reached: {})
            return reply
        }
        defer { origin.stop() }
        let client = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: AsyncHTTPClientTransport.clientConfiguration(idleTimeout: .milliseconds(200))
        )
        let loader = try ResourceLoader(transport: AsyncHTTPClientTransport(client: client))
        await #expect {
            _ = try await loader.load(origin.url("/stalls"))
        } throws: { error in
            (error as? LoadError)?.code == .transport
        }
        await loader.waitForBackgroundWork()
        try await client.shutdown()
    }
}

@Suite("AsyncHTTPClientTransport and closed pooled connections")
struct PooledConnectionRetryTests {
    /// Answers the first request on a connection it keeps open, closes that connection unanswered at
    /// the second, and answers whatever comes on a new connection.
    static func origin() async throws -> RawOrigin {
        var kept = RawOrigin.Reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        kept.keepsServing = true
        return try await RawOrigin.start(answering: [kept, RawOrigin.Reply(""), RawOrigin.Reply(bytes: kept.bytes)])
    }

    /// Runs `body` with a transport on a client of its own, shut down whatever `body` does.
    static func withTransport(_ body: (AsyncHTTPClientTransport) async throws -> Void) async throws {
        let client = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: AsyncHTTPClientTransport.clientConfiguration()
        )
        do {
            try await body(AsyncHTTPClientTransport(client: client))
        } catch {
            try await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    @Test("an idempotent request that meets a connection the origin closed is sent once more, on a new one")
    func retriesIdempotent() async throws {
        let origin = try await Self.origin()
        defer { origin.stop() }
        try await Self.withTransport { transport in
            for _ in 0..<2 {
                let reply = try await transport.send(HTTPRequest(method: .get, url: origin.url("/a")), body: nil)
                var body = Data()
                for try await piece in reply.body { body.append(piece) }
                #expect(body == Data("ok".utf8))
            }
        }
        #expect(origin.requests.count == 3)
    }

    @Test("a POST that meets a closed connection is not sent again")
    func doesNotRetryPost() async throws {
        let origin = try await Self.origin()
        defer { origin.stop() }
        try await Self.withTransport { transport in
            // Read whole, so that the connection goes back to the pool for the POST.
            let first = try await transport.send(HTTPRequest(method: .get, url: origin.url("/a")), body: nil)
            for try await _ in first.body {}
            await #expect(throws: (any Error).self) {
                _ = try await transport.send(HTTPRequest(method: .post, url: origin.url("/a")), body: nil)
            }
        }
        #expect(origin.requests.count == 2)
    }
}
