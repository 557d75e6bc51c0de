import AsyncHTTPClient
import Cachalot
import CachalotServer
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Testing

@Suite("Hostile clients and failing origins")
struct ProxyHardeningTests {
    static let ambiguous: [(String, String)] = [
        (
            "Content-Length and Transfer-Encoding",
            "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ),
        (
            "two different Content-Length values",
            "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"
        ),
        (
            "chunked twice",
            "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"
        ),
        ("Transfer-Encoding in HTTP/1.0", "POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        ("a folded field line", "GET /a HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n"),
        ("a bare carriage return in a field", "GET /a HTTP/1.1\r\nHost: x\r\nX-A: b\rX-B: c\r\n\r\n"),
        ("a control byte in a field's value", "GET /a HTTP/1.1\r\nHost: x\r\nX-A: b\u{1}c\r\n\r\n"),
        ("two spaces after the method", "GET  /a HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("a method that is not a token", "G(T /a HTTP/1.1\r\nHost: x\r\n\r\n"),
        (
            "a chunk longer than its size",
            "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n"
        ),
        ("a Content-Length with a sign", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc"),
        ("whitespace before a colon", "GET /a HTTP/1.1\r\nHost : x\r\n\r\n"),
        ("a field line without a colon", "GET /a HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n"),
        ("two Host fields", "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"),
        ("two Host fields spelt in other cases", "GET /a HTTP/1.1\r\nHOST: x\r\nhost: y\r\n\r\n"),
        ("a Host field in capitals that is not a host", "GET /a HTTP/1.1\r\nHOST: x/y\r\n\r\n"),
        ("a target whose slash a combining mark follows", "GET /\u{0338}x HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("no Host field in HTTP/1.1", "GET /a HTTP/1.1\r\n\r\n"),
        ("an asterisk target for GET", "GET * HTTP/1.1\r\nHost: x\r\n\r\n"),
    ]

    @Test(
        "Ambiguous framing and malformed requests get 400 and the connection closes; nothing reaches the origin",
        arguments: Self.ambiguous.map(\.0)
    )
    func badRequests(name: String) async throws {
        let text = try #require(Self.ambiguous.first { $0.0 == name }?.1)
        let origin = try await TestOrigin.start { _ in .init(body: "origin") }
        let proxy = try await ProxyHarness(origin: origin)
        // A second, valid request after the bad one must never be answered: the connection closes.
        let received = try await RawClient.exchange(text + "GET /b HTTP/1.1\r\nHost: x\r\n\r\n", port: proxy.port)
        #expect(RawClient.statuses(in: received) == [400])
        #expect(origin.requests.isEmpty)
        try await proxy.stop()
    }

    /// Requests the parser refuses with a status other than 400.
    static let unsupported: [(String, String, Int)] = [
        ("an unknown transfer coding", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc", 501),
        ("a method no parser knows", "BREW /a HTTP/1.1\r\nHost: x\r\n\r\n", 501),
        ("HTTP/2's preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        ("HTTP/0.9's version", "GET /a HTTP/0.9\r\n\r\n", 505),
    ]

    @Test(
        "A transfer coding or method the proxy does not know gets 501, a version other than 1.x 505; nothing reaches the origin",
        arguments: Self.unsupported.map(\.0)
    )
    func unsupportedRequests(name: String) async throws {
        let (text, status) = try #require(Self.unsupported.first { $0.0 == name }.map { ($0.1, $0.2) })
        let origin = try await TestOrigin.start { _ in .init(body: "origin") }
        let proxy = try await ProxyHarness(origin: origin)
        let received = try await RawClient.exchange(text + "GET /b HTTP/1.1\r\nHost: x\r\n\r\n", port: proxy.port)
        #expect(RawClient.statuses(in: received) == [status])
        #expect(received.lowercased().contains("\r\nconnection: close\r\n"), "\(received)")
        #expect(origin.requests.isEmpty)
        try await proxy.stop()
    }

    /// Requests whose response is the connection's last, and the statuses each gets.
    static let lastResponses: [(String, String, [Int])] = [
        (
            "a good request, then an unparsable one in the same write",
            "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n", [200, 400]
        ),
        ("a request with Connection: close", "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", [200]),
        (
            "a request with Connection: close, then bytes that are not a request (RFC 9112 §9.6: not read)",
            "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGARBAGE\r\n\r\n", [200]
        ),
        (
            "a request with Connection: close, then another request (not answered)",
            "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n", [200]
        ),
    ]

    @Test(
        "A response that ends its connection says Connection: close, from the cache at once or from the origin",
        arguments: ["GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "GET /a HTTP/1.0\r\n\r\n"]
    )
    func closingResponseSaysSo(request: String) async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "a") }
        let proxy = try await ProxyHarness(origin: origin, memoryCostLimit: 1 << 20)
        // A miss, from the connection's task; then a memory hit, from the event loop.
        for expected in ["fwd=uri-miss", "hit"] {
            let received = try await RawClient.exchange(request, port: proxy.port)
            let head = received.components(separatedBy: "\r\n\r\n").first?.lowercased() ?? ""
            #expect(head.contains(expected), "\(head)")
            #expect(head.contains("\r\nconnection: close"), "\(head)")
        }
        try await proxy.stop()
    }

    @Test(
        "The last response reaches a slow reader whole, then the 400 for what could not be parsed, then the close",
        .timeLimit(.minutes(1)),
        arguments: Self.lastResponses.map(\.0)
    )
    func lastResponseWhole(name: String) async throws {
        let (text, statuses) = try #require(Self.lastResponses.first { $0.0 == name }.map { ($0.1, $0.2) })
        // Far more than the kernel's buffers take at once from a slow reader.
        let body = String(repeating: "x", count: 8 << 20)
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "no-store")], body: body) }
        let proxy = try await ProxyHarness(origin: origin)
        // A close that drops what the proxy still holds to send cuts the body short only if the
        // client has not read it yet, which depends on timing: four connections in turn.
        for _ in 0..<4 {
            // The read ends only because the server closes.
            let received = try await RawClient.exchange(text, port: proxy.port, receiveBufferSize: 4_096)
            #expect(RawClient.statuses(in: received) == statuses)
            let responses = received.components(separatedBy: "HTTP/1.1 400 ")
            #expect(responses.first?.hasSuffix("\r\n\r\n" + body) == true, "\(received.utf8.count) bytes")
            if statuses.count == 2 {
                let bad = responses.dropFirst().first?.lowercased() ?? ""
                #expect(bad.contains("\r\nconnection: close\r\n"), "\(bad)")
                #expect(bad.hasSuffix("\r\n\r\n"), "\(bad)")
            }
        }
        #expect(origin.requests.count == 4)
        try await proxy.stop()
    }

    @Test("A header section over the limit gets 431, a target over the limit 414")
    func limits() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "origin") }
        let proxy = try await ProxyHarness(origin: origin) {
            $0.limits.maximumHeaderBytes = 1_024
            $0.limits.maximumRequestLine = 512
        }
        let fields = (0..<40).map { "X-Field-\($0): \(String(repeating: "v", count: 40))\r\n" }.joined()
        let large = try await RawClient.exchange("GET /a HTTP/1.1\r\nHost: x\r\n\(fields)\r\n", port: proxy.port)
        #expect(RawClient.statuses(in: large) == [431])
        let long = "/" + String(repeating: "a", count: 600)
        let tooLong = try await RawClient.exchange("GET \(long) HTTP/1.1\r\nHost: x\r\n\r\n", port: proxy.port)
        #expect(RawClient.statuses(in: tooLong) == [414])
        #expect(origin.requests.isEmpty)
        try await proxy.stop()
    }

    @Test(
        "A request after a good one on its connection is checked too, its fields the same or not",
        arguments: [
            ("GET /\(String(repeating: "a", count: 600)) HTTP/1.1\r\nHost: x\r\n\r\n", 414),
            ("GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400),
            ("GET /a HTTP/1.1\r\nHost: x/y\r\n\r\n", 400),
        ]
    )
    func laterRequestsChecked(request: String, status: Int) async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "a") }
        let proxy = try await ProxyHarness(origin: origin, memoryCostLimit: 1 << 20) {
            $0.limits.maximumRequestLine = 512
        }
        // The first is a miss, the second a hit made from the first's request (same fields).
        let good = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
        let received = try await RawClient.exchange(good + good + request, port: proxy.port)
        #expect(RawClient.statuses(in: received) == [200, 200, status])
        #expect(origin.requests.count == 1)
        try await proxy.stop()
    }

    @Test("A request line far over every limit (100 KB) gets 414, not 431; long header fields still 431")
    func hugeRequestLine() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "origin") }
        let proxy = try await ProxyHarness(origin: origin)
        let long = "/" + String(repeating: "a", count: 100_000)
        let tooLong = try await RawClient.exchange("GET \(long) HTTP/1.1\r\nHost: x\r\n\r\n", port: proxy.port)
        #expect(RawClient.statuses(in: tooLong) == [414])
        let field = "X-Long: " + String(repeating: "v", count: 100_000)
        let large = try await RawClient.exchange("GET /a HTTP/1.1\r\nHost: x\r\n\(field)\r\n\r\n", port: proxy.port)
        #expect(RawClient.statuses(in: large) == [431])
        #expect(origin.requests.isEmpty)
        try await proxy.stop()
    }

    @Test("A request body over the limit gets 413 and is not forwarded")
    func bodyLimit() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "origin") }
        let proxy = try await ProxyHarness(origin: origin) { $0.limits.maximumRequestBody = 100 }
        let body = String(repeating: "b", count: 101)
        let received = try await RawClient.exchange(
            "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n\(body)",
            port: proxy.port
        )
        #expect(RawClient.statuses(in: received) == [413])
        #expect(origin.requests.isEmpty)
        try await proxy.stop()
    }

    @Test("A client that does not finish its request head in time is disconnected")
    func slowClient() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "origin") }
        let proxy = try await ProxyHarness(origin: origin) { $0.limits.requestHeadTimeout = .milliseconds(200) }
        // Half a head, then nothing: the read ends only because the server closes.
        let received = try await RawClient.exchange("GET /a HTTP/1.1\r\nHost: x\r\nX-Slow: ", port: proxy.port)
        #expect(received.isEmpty)
        #expect(origin.requests.isEmpty)
        try await proxy.stop()
    }

    @Test(
        "A kept-alive connection left idle after a response is disconnected after the head timeout",
        .timeLimit(.minutes(1))
    )
    func idleAfterResponse() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "origin") }
        let proxy = try await ProxyHarness(origin: origin) { $0.limits.requestHeadTimeout = .milliseconds(200) }
        // One request answered, then nothing: the read ends only because the server closes.
        let received = try await RawClient.exchange("GET /a HTTP/1.1\r\nHost: x\r\n\r\n", port: proxy.port)
        #expect(RawClient.statuses(in: received) == [200])
        try await proxy.stop()
    }

    @Test(
        "A client that stops reading a response is disconnected after the send timeout, logged off the event loop",
        .timeLimit(.minutes(1))
    )
    func clientStopsReading() async throws {
        // More than the kernel's buffers on both ends hold, so that the proxy's fills.
        let body = Data(repeating: 1, count: 48 << 20)
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "no-store")], data: body) }
        let proxy = try await ProxyHarness(origin: origin) { $0.limits.sendTimeout = .milliseconds(200) }
        let received = try await RawClient.withConnection(port: proxy.port) { inbound, outbound in
            try await outbound.write(ByteBuffer(string: "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"))
            // Nothing is read until the proxy has given up on this client.
            await proxy.logs.wait(for: "stopped reading")
            var count = 0
            do {
                while let piece = try await inbound.next() { count += piece.readableBytes }
            } catch {
                // The connection may end with a reset: what came before it counts.
            }
            return count
        }
        #expect(received > 0)
        #expect(received < body.count)
        // An event loop never waits on the log's output.
        #expect(proxy.logs.loggedOnEventLoop("stopped reading").isEmpty)
        try await proxy.stop()
    }

    /// A request head whose body never comes whole, by `Content-Length` or chunked.
    static let unfinishedBodies: [(String, String)] = [
        ("Content-Length", "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nsome"),
        ("chunked", "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nsome\r\n"),
    ]

    @Test(
        "A client that stops sending its request body gets 408 and is disconnected; nothing reaches the origin",
        .timeLimit(.minutes(1)),
        arguments: Self.unfinishedBodies.map(\.0)
    )
    func requestBodyTimeout(framing: String) async throws {
        let text = try #require(Self.unfinishedBodies.first { $0.0 == framing }?.1)
        let origin = try await TestOrigin.start { _ in .init(body: "origin") }
        let log = AccessLogOutput()
        let proxy = try await ProxyHarness(origin: origin) {
            $0.limits.requestBodyTimeout = .milliseconds(200)
            $0.accessLog = log.accessLog(.text)
        }
        // The read ends only because the server closes.
        let received = try await RawClient.exchange(text, port: proxy.port)
        #expect(RawClient.statuses(in: received) == [408])
        #expect(origin.requests.isEmpty)
        try await proxy.stop()
        #expect(log.lines.count == 1)
        #expect(log.lines.first?.contains(" 127.0.0.1 POST /a 408 bytes=0 ms=") == true, "\(log.lines)")
        #expect(log.lines.first?.hasSuffix(" cache=request-timeout") == true)
    }

    @Test(
        "A request body not whole within the total bound gets 408, however recent its last piece",
        .timeLimit(.minutes(1))
    )
    func requestBodyTotalTimeout() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "origin") }
        let proxy = try await ProxyHarness(origin: origin) {
            $0.limits.requestBodyTimeout = .seconds(60)
            $0.limits.requestBodyTotalTimeout = .milliseconds(200)
        }
        let received = try await RawClient.exchange(Self.unfinishedBodies[0].1, port: proxy.port)
        #expect(RawClient.statuses(in: received) == [408])
        #expect(origin.requests.isEmpty)
        try await proxy.stop()
    }

    /// A proxy whose origin holds every request until `gate` opens, and tells `arrived` of each.
    static func heldOrigin(gate: Gate, arrived: Countdown) async throws -> TestOrigin {
        try await TestOrigin.start { _ in
            arrived.increment()
            await gate.wait()
            return .init(fields: [("Cache-Control", "no-store")], body: "origin")
        }
    }

    /// Opens a connection that is answering a request (held at the origin), and runs `body`;
    /// then lets the origin answer and checks that the connection got its response.
    static func withBusyConnection(
        port: Int,
        gate: Gate,
        arrived: Countdown,
        _ body: () async throws -> Void
    ) async throws {
        try await RawClient.withConnection(port: port) { inbound, outbound in
            try await outbound.write(ByteBuffer(string: "GET /held HTTP/1.1\r\nHost: x\r\n\r\n"))
            await arrived.wait(for: 1)
            try await body()
            gate.open()
            let response = try await RawClient.readResponse(&inbound)
            #expect(RawClient.statuses(in: response) == [200])
        }
    }

    @Test("At the connection limit, a new connection takes the place of the one idle the longest")
    func idleConnectionClosedForNewOne() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "no-store")], body: "origin") }
        let proxy = try await ProxyHarness(origin: origin) {
            $0.limits.maximumConnections = 1
            $0.limits.requestHeadTimeout = .seconds(60)
        }
        try await RawClient.withConnection(port: proxy.port) { inbound, outbound in
            try await outbound.write(ByteBuffer(string: "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"))
            let response = try await RawClient.readResponse(&inbound)
            #expect(RawClient.statuses(in: response) == [200])
            // This connection is now idle, kept alive: the next one is answered in its place.
            let next = try await RawClient.exchange(
                "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                port: proxy.port
            )
            #expect(RawClient.statuses(in: next) == [200])
            // And the idle one was closed: its input ends (or is reset).
            let rest = try? await inbound.next()
            #expect(rest == nil)
        }
        try await proxy.stop()
    }

    @Test("At the connection limit with every connection busy, a new connection is closed at once")
    func connectionLimit() async throws {
        let (gate, arrived) = (Gate(), Countdown())
        let origin = try await Self.heldOrigin(gate: gate, arrived: arrived)
        let proxy = try await ProxyHarness(origin: origin) {
            $0.limits.maximumConnections = 1
            $0.limits.requestHeadTimeout = .seconds(60)
        }
        try await Self.withBusyConnection(port: proxy.port, gate: gate, arrived: arrived) {
            let refused = try await RawClient.exchange("GET /b HTTP/1.1\r\nHost: x\r\n\r\n", port: proxy.port)
            #expect(refused.isEmpty)
        }
        try await proxy.stop()
    }

    @Test(
        "The admin listener answers /healthz while the proxy's listener is full, of idle or of busy connections",
        arguments: [false, true]
    )
    func adminHasItsOwnConnections(busy: Bool) async throws {
        let (gate, arrived) = (Gate(), Countdown())
        let origin = try await Self.heldOrigin(gate: gate, arrived: arrived)
        let proxy = try await ProxyHarness(origin: origin) {
            $0.limits.maximumConnections = 1
            $0.limits.requestHeadTimeout = .seconds(60)
        }
        if busy {
            try await Self.withBusyConnection(port: proxy.port, gate: gate, arrived: arrived) {
                let health = try await proxy.send("/healthz", admin: true)
                #expect(health.status == 200)
            }
        } else {
            gate.open()
            try await RawClient.withConnection(port: proxy.port) { inbound, outbound in
                try await outbound.write(ByteBuffer(string: "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"))
                let response = try await RawClient.readResponse(&inbound)
                #expect(RawClient.statuses(in: response) == [200])
                let health = try await proxy.send("/healthz", admin: true)
                #expect(health.status == 200)
                // The proxy's idle connection was not closed for the admin listener's.
                try await outbound.write(ByteBuffer(string: "GET /b HTTP/1.1\r\nHost: x\r\n\r\n"))
                let again = try await RawClient.readResponse(&inbound)
                #expect(RawClient.statuses(in: again) == [200])
            }
        }
        try await proxy.stop()
    }

    @Test("An origin that cannot be reached gives 502, one that does not answer in time 504")
    func originFailures() async throws {
        // Port 1 (tcpmux) has no listener here: a stopped origin's port could be taken by another test's.
        let unused = try await TestOrigin.start { _ in .init(body: "never asked") }
        let proxy = try await ProxyHarness(origin: unused) { $0.origin = URL(string: "http://127.0.0.1:1/")! }
        let refused = try await proxy.send("/a")
        #expect(refused.status == 502)
        #expect(refused.cacheStatus == "cachalot; fwd=miss; detail=origin-unreachable")
        #expect(unused.requests.isEmpty)
        try await proxy.stop()

        let gate = Gate()
        let slow = try await TestOrigin.start { _ in
            await gate.wait()
            return .init(body: "late")
        }
        let timed = try await ProxyHarness(origin: slow, originTimeout: .milliseconds(200)) {
            $0.limits.shutdownGracePeriod = .milliseconds(100)
        }
        let late = try await timed.send("/a")
        #expect(late.status == 504)
        #expect(late.cacheStatus == "cachalot; fwd=miss; detail=origin-timeout")
        gate.open()
        try await timed.stop()
    }

    @Test("Interim answers (102, 103) reach an HTTP/1.1 client before the final one, and are never stored")
    func interimRelayed() async throws {
        let raw = try await RawOrigin.start { _ in
            .init(
                "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
                    + "HTTP/1.1 200 OK\r\nCache-Control: max-age=100\r\nContent-Length: 2\r\n\r\nok"
            )
        }
        defer { raw.stop() }
        let unused = try await TestOrigin.start { _ in .init(body: "never asked") }
        let proxy = try await ProxyHarness(origin: unused) { $0.origin = raw.url("/") }
        let first = try await RawClient.exchange(
            "GET /i HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            port: proxy.port
        )
        #expect(RawClient.statuses(in: first) == [102, 103, 200], "\(first)")
        #expect(first.contains("Link: </s.css>; rel=preload"))
        #expect(first.hasSuffix("\r\n\r\nok"))
        // The stored answer is the final one alone.
        let second = try await RawClient.exchange(
            "GET /i HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            port: proxy.port
        )
        #expect(RawClient.statuses(in: second) == [200], "\(second)")
        #expect(second.contains("hit"))
        // An HTTP/1.0 client never gets an interim answer.
        let old = try await RawClient.exchange("GET /j HTTP/1.0\r\nHost: x\r\n\r\n", port: proxy.port)
        #expect(RawClient.statuses(in: old) == [200], "\(old)")
        #expect(raw.requests.count == 2)
        try await proxy.stop()
    }

    @Test("An origin that sends its head and then stalls: the client gets the head at once, then the connection closes")
    func stalledBody() async throws {
        let raw = try await RawOrigin.start { _ in
            .init(
                "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nCache-Control: max-age=60\r\n\r\nonly some",
                staysOpen: true
            )
        }
        defer { raw.stop() }
        let unused = try await TestOrigin.start { _ in .init(body: "never asked") }
        let proxy = try await ProxyHarness(origin: unused, originTimeout: .milliseconds(300)) {
            $0.origin = raw.url("/")
        }
        let received = try await RawClient.exchange("GET /s HTTP/1.1\r\nHost: x\r\n\r\n", port: proxy.port)
        #expect(RawClient.statuses(in: received) == [200], "\(received)")
        #expect(received.hasSuffix("only some"), "\(received)")
        try await proxy.stop()
        #expect(try proxy.disk.count == 0)
    }

    @Test("An origin's status 000 with a body gets 502 for that request, and the proxy serves the next one")
    func statusZero() async throws {
        let raw = try await RawOrigin.start { head in
            head.hasPrefix("GET /odd")
                ? .init("HTTP/1.1 000 Odd\r\nContent-Length: 2\r\n\r\nhi")
                : .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nCache-Control: max-age=60\r\n\r\nok")
        }
        defer { raw.stop() }
        let unused = try await TestOrigin.start { _ in .init(body: "never asked") }
        let proxy = try await ProxyHarness(origin: unused) { $0.origin = raw.url("/") }
        let odd = try await proxy.send("/odd")
        #expect(odd.status == 502)
        #expect(odd.cacheStatus == "cachalot; fwd=miss; detail=invalid-response")
        let fine = try await proxy.send("/fine")
        #expect(fine.status == 200 && fine.text == "ok")
        #expect(unused.requests.isEmpty)
        try await proxy.stop()
    }
}

@Suite("Stale when the origin is unreachable")
struct ProxyStaleIfUnreachableTests {
    /// An origin that answers once, then closes every connection without a word: unreachable,
    /// with no port left for another test's server to take.
    static func failingOrigin() async throws -> RawOrigin {
        try await RawOrigin.start(answering: [
            .init("HTTP/1.1 200 OK\r\nCache-Control: max-age=0\r\nContent-Length: 4\r\n\r\nkept"), .init(""),
        ])
    }

    @Test("With the setting, a stale response answers when the origin is down, and Cache-Status says so")
    func staleIfUnreachable() async throws {
        let origin = try await Self.failingOrigin()
        let proxy = try await ProxyHarness(origin: try await TestOrigin.start(), staleIfUnreachable: true) {
            $0.origin = origin.url("/")
        }
        _ = try await proxy.send("/s")
        let stale = try await proxy.send("/s")
        #expect(stale.status == 200)
        #expect(stale.text == "kept")
        #expect(stale.cacheStatus.hasPrefix("cachalot; fwd=stale; ttl="))
        #expect(stale.cacheStatus.hasSuffix("detail=stale-if-unreachable"))
        // Whether the second GET's tries reached the origin before it closed depends on timing
        // (a request written on the connection it was closing is never read).
        #expect(origin.requests.count >= 1)
        try await proxy.stop()
        origin.stop()
    }

    @Test("Without it, the same request gets 502")
    func offByDefault() async throws {
        let origin = try await Self.failingOrigin()
        let proxy = try await ProxyHarness(origin: try await TestOrigin.start()) { $0.origin = origin.url("/") }
        _ = try await proxy.send("/s")
        #expect(try await proxy.send("/s").status == 502)
        try await proxy.stop()
        origin.stop()
    }
}

@Suite("Pooled origin connections")
struct ProxyPooledConnectionTests {
    @Test("A GET that meets an origin connection closed under it is retried once, not answered 502")
    func retried() async throws {
        var kept = RawOrigin.Reply("HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: 2\r\n\r\nok")
        kept.keepsServing = true
        let origin = try await RawOrigin.start(answering: [
            kept, RawOrigin.Reply(""), RawOrigin.Reply(bytes: kept.bytes),
        ])
        let proxy = try await ProxyHarness(origin: try await TestOrigin.start()) { $0.origin = origin.url("/") }
        #expect(try await proxy.send("/a").text == "ok")
        let second = try await proxy.send("/a")
        #expect(second.status == 200)
        #expect(second.text == "ok")
        #expect(origin.requests.count == 3)
        try await proxy.stop()
        origin.stop()
    }
}
