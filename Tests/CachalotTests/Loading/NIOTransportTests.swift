import CachalotNIO
import CachalotTestOrigin
import Foundation
import HTTPTypes
import Synchronization
import Testing

@testable import Cachalot

@Suite("NIOTransport against hostile and slow origins", .timeLimit(.minutes(1)))
struct NIOTransportTests {
    /// Answers an origin can send that no response can be made of. Each must fail its one
    /// request with `invalidResponse` or `connectionClosed`, and the process go on.
    static let broken: [(String, String)] = [
        ("status 000 with a body", "HTTP/1.1 000 Odd\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"),
        ("status 099 with a body", "HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nhi"),
        ("status 000 without a length", "HTTP/1.1 000 Odd\r\n\r\nhi"),
        ("a switch of protocols nobody asked for", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nhi"),
        ("not HTTP at all", "hello there\r\n\r\n"),
        ("a four-digit status", "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"),
        ("two different lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc"),
        ("a negative length", "HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nab"),
        ("broken chunking", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"),
        ("a body shorter than its length", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"),
        ("a head cut off", "HTTP/1.1 200 OK\r\nContent-Le"),
        ("nothing at all", ""),
        ("a field without a colon", "HTTP/1.1 200 OK\r\nNoColon\r\nContent-Length: 0\r\n\r\n"),
    ]

    @Test("an origin's broken answer fails that request with an HTTPTransportError", arguments: Self.broken.map(\.0))
    func brokenAnswers(name: String) async throws {
        let text = try #require(Self.broken.first { $0.0 == name }?.1)
        let origin = try await RawOrigin.start { _ in .init(text) }
        defer { origin.stop() }
        let transport = NIOTransport()
        defer { transport.shutDown() }
        await #expect {
            let reply = try await transport.send(HTTPRequest(url: origin.url("/x")), body: nil)
            for try await _ in reply.body {}
        } throws: { error in
            let code = (error as? HTTPTransportError)?.code
            return code == .invalidResponse || code == .connectionClosed
        }
    }

    @Test("interim answers 102 and 103 are handed on in order, 100 is not, and the final answer comes with its body")
    func interimAnswers() async throws {
        let origin = try await RawOrigin.start { _ in
            .init(
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n"
                    + "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
                    + "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Final: yes\r\n\r\nbody"
            )
        }
        defer { origin.stop() }
        let transport = NIOTransport()
        defer { transport.shutDown() }
        let relayed = Mutex<[Int]>([])
        let reply = try await transport.send(HTTPRequest(url: origin.url("/x")), body: nil) { interim in
            relayed.withLock { $0.append(interim.status.code) }
        }
        // 100 Continue concerns the request's body, which has gone already.
        #expect(relayed.withLock { $0 } == [102, 103])
        #expect(reply.response.status.code == 200)
        #expect(reply.response.headerFields[HTTPField.Name("X-Final")!] == "yes")
        #expect(reply.response.headerFields[HTTPField.Name("Link")!] == nil)
        var body = Data()
        for try await piece in reply.body { body.append(piece) }
        #expect(body == Data("body".utf8))
    }

    @Test("a kept-alive connection serves the next request; a HEAD's answer has no body to wait for")
    func keepsConnectionsAlive() async throws {
        var kept = RawOrigin.Reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        kept.keepsServing = true
        var head = RawOrigin.Reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n")
        head.keepsServing = true
        let origin = try await RawOrigin.start(answering: [kept, head, kept])
        defer { origin.stop() }
        let transport = NIOTransport()
        defer { transport.shutDown() }
        for method in [HTTPRequest.Method.get, .head, .get] {
            let reply = try await transport.send(HTTPRequest(method: method, url: origin.url("/k")), body: nil)
            var body = Data()
            for try await piece in reply.body { body.append(piece) }
            #expect(reply.response.status.code == 200)
            #expect(body == (method == .head ? Data() : Data("ok".utf8)))
        }
        #expect(origin.requests.count == 3)
        #expect(origin.connectionCount == 1)
    }

    @Test(
        "a request goes out as its head says: the request line, Host, each field once and in order, a body framed by its length alone"
    )
    func requestBytes() async throws {
        var reply = RawOrigin.Reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        reply.keepsServing = true
        let origin = try await RawOrigin.start(answering: [reply])
        defer { origin.stop() }
        let transport = NIOTransport()
        defer { transport.shutDown() }
        var post = HTTPRequest(method: .post, url: origin.url("/p?q=1"))
        post.headerFields[.accept] = "text/plain"
        post.headerFields.append(HTTPField(name: HTTPField.Name("X-Two")!, value: "a"))
        post.headerFields.append(HTTPField(name: HTTPField.Name("X-Two")!, value: "b"))
        let requests: [(HTTPRequest, Data?)] = [
            (post, Data("abc".utf8)), (HTTPRequest(method: .get, url: origin.url("/g")), nil),
        ]
        for (request, body) in requests {
            let answer = try await transport.send(request, body: body)
            for try await _ in answer.body {}
        }
        let host = "Host: 127.0.0.1:\(origin.port)"
        // The origin reads heads alone: the POST's body, sent as it is, comes before the next head.
        #expect(
            origin.requests == [
                "POST /p?q=1 HTTP/1.1\r\n\(host)\r\nAccept: text/plain\r\nX-Two: a\r\nX-Two: b\r\nContent-Length: 3",
                "abcGET /g HTTP/1.1\r\n\(host)",
            ]
        )
        #expect(origin.connectionCount == 1)
    }

    @Test("a GET that meets a kept connection the origin closed is sent again on a new one; a POST is not")
    func staleConnections() async throws {
        for method in [HTTPRequest.Method.get, .post] {
            var kept = RawOrigin.Reply("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            kept.keepsServing = true
            let origin = try await RawOrigin.start(answering: [
                kept, RawOrigin.Reply(""), RawOrigin.Reply(bytes: kept.bytes),
            ])
            defer { origin.stop() }
            let transport = NIOTransport()
            defer { transport.shutDown() }
            let first = try await transport.send(HTTPRequest(method: .get, url: origin.url("/a")), body: nil)
            for try await _ in first.body {}
            if method == .get {
                let second = try await transport.send(HTTPRequest(method: method, url: origin.url("/a")), body: nil)
                var body = Data()
                for try await piece in second.body { body.append(piece) }
                #expect(body == Data("ok".utf8))
                #expect(origin.requests.count == 3)
            } else {
                await #expect(throws: HTTPTransportError.self) {
                    _ = try await transport.send(HTTPRequest(method: method, url: origin.url("/a")), body: nil)
                }
                #expect(origin.requests.count == 2)
            }
        }
    }

    @Test("an origin that sends no head in time fails with responseTimeout, one that stalls a body with idleTimeout")
    func timeouts() async throws {
        let silent = try await RawOrigin.start { _ in .init("", staysOpen: true) }
        defer { silent.stop() }
        let stalling = try await RawOrigin.start { _ in
            .init("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly some", staysOpen: true)
        }
        defer { stalling.stop() }
        let headBound = NIOTransport(
            configuration: .init(responseTimeout: .milliseconds(200), idleTimeout: .seconds(30))
        )
        defer { headBound.shutDown() }
        await #expect {
            _ = try await headBound.send(HTTPRequest(url: silent.url("/s")), body: nil)
        } throws: { error in
            (error as? HTTPTransportError)?.code == .responseTimeout
                && (error as? HTTPTransportError)?.isTimeout == true
        }
        let transport = NIOTransport(
            configuration: .init(responseTimeout: .seconds(30), idleTimeout: .milliseconds(200))
        )
        defer { transport.shutDown() }
        let reply = try await transport.send(HTTPRequest(url: stalling.url("/s")), body: nil)
        await #expect {
            for try await _ in reply.body {}
        } throws: { error in
            (error as? HTTPTransportError)?.code == .idleTimeout
        }
    }

    @Test("a refused connection fails at once with connectFailed")
    func refused() async throws {
        // Port 1 (tcpmux) has no listener here: a stopped origin's port could be taken by another test's.
        let transport = NIOTransport()
        await #expect {
            _ = try await transport.send(HTTPRequest(url: URL(string: "http://127.0.0.1:1/gone")!), body: nil)
        } throws: { error in
            (error as? HTTPTransportError)?.code == .connectFailed
        }
    }

    @Test("the loader turns a status-000 answer into a transport error, and loads the next URL as usual")
    func loaderSurvives() async throws {
        let origin = try await RawOrigin.start { head in
            head.hasPrefix("GET /odd")
                ? .init("HTTP/1.1 000 Odd\r\nContent-Length: 2\r\n\r\nhi")
                : .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
        defer { origin.stop() }
        let transport = NIOTransport()
        defer { transport.shutDown() }
        let loader = try ResourceLoader(transport: transport)
        await #expect {
            _ = try await loader.load(origin.url("/odd"))
        } throws: { error in
            ((error as? LoadError)?.underlying as? HTTPTransportError)?.code == .invalidResponse
        }
        #expect(try await loader.load(origin.url("/fine")).body == Data("ok".utf8))
    }
}
