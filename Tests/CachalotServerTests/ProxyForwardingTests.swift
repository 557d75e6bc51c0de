import AsyncHTTPClient
import CachalotServer
import CachalotTestOrigin
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Testing

@Suite("What the proxy passes on and what it removes")
struct ProxyForwardingTests {
    @Test("Hop-by-hop fields, those Connection names, and Proxy-* go in both directions; Via goes both ways")
    func hopByHop() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(
                fields: [
                    ("Connection", "X-Origin-Hop"), ("X-Origin-Hop", "1"), ("Keep-Alive", "timeout=5"),
                    ("Proxy-Authenticate", "Basic"), ("X-End", "kept"),
                ],
                body: "ok"
            )
        }
        let proxy = try await ProxyHarness(origin: origin)
        let reply = try await proxy.send(
            "/hop",
            headers: [
                ("Connection", "X-Client-Hop"), ("X-Client-Hop", "1"), ("Keep-Alive", "timeout=5"),
                ("Proxy-Authorization", "Basic abc"), ("TE", "trailers"), ("X-Client-End", "kept"),
            ]
        )
        let sent = try #require(origin.requests.first)
        let sentNames = Set(sent.headerFields.map { $0.name.canonicalName })
        for name in ["x-client-hop", "keep-alive", "proxy-authorization", "te"] {
            #expect(!sentNames.contains(name), "\(name) reached the origin")
        }
        #expect(sent.headerFields[HTTPField.Name("X-Client-End")!] == "kept")
        #expect(sent.headerFields[.via] == "1.1 cachalot")
        for name in ["x-origin-hop", "keep-alive", "proxy-authenticate"] {
            #expect(reply.headers[name].isEmpty, "\(name) reached the client")
        }
        #expect(reply.headers["x-end"] == ["kept"])
        try await proxy.stop()
    }

    @Test("The client's fields reach the origin in the order they came, repeated lines too, and the proxy's after them")
    func fieldOrder() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "ok") }
        let proxy = try await ProxyHarness(origin: origin)
        let client = [
            ("X-A", "1"), ("Accept", "text/html"), ("X-B", "2"), ("Accept", "image/webp"), ("X-A", "3"),
        ]
        _ = try await proxy.send("/order", headers: client)
        let sent = try #require(origin.requests.first).headerFields.map { ($0.name.canonicalName, $0.value) }
        let clientNames: Set<String> = ["x-a", "accept", "x-b"]
        // RFC 9110 §5.3: the lines of one field name are one list, in order.
        #expect(
            sent.filter { clientNames.contains($0.0) }.map { "\($0.0): \($0.1)" }
                == client.map { "\($0.0.lowercased()): \($0.1)" }
        )
        let lastClient = try #require(sent.lastIndex { clientNames.contains($0.0) })
        for name in ["forwarded", "x-forwarded-for", "x-forwarded-proto", "via"] {
            let index = try #require(sent.firstIndex { $0.0 == name }, "\(name) did not reach the origin")
            #expect(index > lastClient, "\(name) came before the client's own fields")
        }
        try await proxy.stop()
    }

    @Test("A client's Forwarded and X-Forwarded-* fields are replaced by the proxy's own, without its Host")
    func untrustedForwarding() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "ok") }
        let proxy = try await ProxyHarness(origin: origin)
        _ = try await proxy.send(
            "/f",
            headers: [
                ("Forwarded", "for=6.6.6.6"), ("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-Host", "evil.example"),
                ("X-Forwarded-Proto", "https"),
            ]
        )
        let sent = try #require(origin.requests.first)
        #expect(sent.headerFields[values: HTTPField.Name("Forwarded")!] == ["for=127.0.0.1;proto=http"])
        #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-For")!] == ["127.0.0.1"])
        #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-Proto")!] == ["http"])
        #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-Host")!].isEmpty)
        try await proxy.stop()
    }

    @Test("The client's Host is not keyed, so it reaches the origin in no field: the origin sees its own authority")
    func hostNotForwarded() async throws {
        let origin = try await TestOrigin.start { request in
            .init(fields: [("Cache-Control", "max-age=60")], body: request.headerFields[HTTPField.Name("Host")!] ?? "")
        }
        let proxy = try await ProxyHarness(origin: origin)
        let first = try await proxy.send("/page", headers: [("Host", "evil.example")])
        #expect(first.text == "127.0.0.1:\(origin.port)")
        let sent = try #require(origin.requests.first)
        #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-Host")!].isEmpty)
        let forwarded = sent.headerFields[values: HTTPField.Name("Forwarded")!].joined(separator: ",")
        #expect(!forwarded.contains("host="), "\(forwarded)")
        #expect(!sent.headerFields.contains { $0.value.contains("evil.example") })
        // The same key whatever the Host: the second client gets the first's answer.
        let second = try await proxy.send("/page", headers: [("Host", "other.example")])
        #expect(second.cacheStatus.contains("hit"))
        #expect(origin.requests.count == 1)
        try await proxy.stop()
    }

    @Test("With keysHost, each host has its own entries, and the origin is told the client's host")
    func keyedHost() async throws {
        let origin = try await TestOrigin.start { request in
            .init(
                fields: [("Cache-Control", "max-age=60")],
                body: request.headerFields[HTTPField.Name("Host")!] ?? ""
            )
        }
        let proxy = try await ProxyHarness(origin: origin) { $0.keysHost = true }
        for host in ["a.example", "B.example:8080"] {
            let miss = try await proxy.send("/page", headers: [("Host", host)])
            #expect(miss.text == host.lowercased())
            #expect(miss.cacheStatus.contains("fwd=uri-miss"))
        }
        let hit = try await proxy.send("/page", headers: [("Host", "A.example")])
        #expect(hit.cacheStatus.contains("hit") && hit.text == "a.example")
        #expect(origin.requests.count == 2)
        let sent = try #require(origin.requests.first)
        #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-Host")!] == ["a.example"])
        let forwarded = sent.headerFields[values: HTTPField.Name("Forwarded")!]
        #expect(forwarded == ["for=127.0.0.1;host=\"a.example\";proto=http"])
        // A purge names the host whose responses go; the other host's stay.
        let purged = try await proxy.send("/purge?url=http://a.example/page", method: .POST, admin: true)
        #expect(purged.status == 200)
        #expect(try await proxy.send("/page", headers: [("Host", "a.example")]).cacheStatus.contains("fwd=uri-miss"))
        #expect(try await proxy.send("/page", headers: [("Host", "b.example:8080")]).cacheStatus.contains("hit"))
        try await proxy.stop()
    }

    @Test("A trusted proxy's X-Forwarded-Host and Forwarded host= never reach the origin; keyed, the key's host does")
    func trustedHost() async throws {
        for keysHost in [false, true] {
            let origin = try await TestOrigin.start { _ in .init(body: "ok") }
            let proxy = try await ProxyHarness(origin: origin) {
                $0.trustedProxies = ["127.0.0.1"]
                $0.keysHost = keysHost
            }
            _ = try await proxy.send(
                "/h\(keysHost)",
                headers: [
                    ("Host", "www.example"), ("X-Forwarded-Host", "evil.example"),
                    ("Forwarded", "for=203.0.113.9;host=evil.example;proto=https"),
                ]
            )
            let sent = try #require(origin.requests.first)
            let forwarded = sent.headerFields[values: HTTPField.Name("Forwarded")!]
            #expect(forwarded.first == "for=203.0.113.9;proto=https")
            #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-Host")!] == (keysHost ? ["www.example"] : []))
            // A trusted proxy that did not say the protocol: the proxy's own.
            #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-Proto")!] == ["http"])
            #expect(!sent.headerFields.contains { $0.value.contains("evil.example") })
            try await proxy.stop()
        }
    }

    @Test("A Host that is not a host and an optional port gets 400, and nothing reaches the origin")
    func invalidHost() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "ok") }
        let proxy = try await ProxyHarness(origin: origin) { $0.keysHost = true }
        for host in ["a.example/x", "user@a.example", "a example"] {
            let received = try await RawClient.exchange(
                "GET /x HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n",
                port: proxy.port
            )
            #expect(RawClient.statuses(in: received) == [400], "\(host)")
        }
        #expect(origin.requests.isEmpty)
        try await proxy.stop()
    }

    /// Fields by which a client could steer what the origin answers under a key that does not
    /// hold them.
    static let overrides = [
        "X-Original-URL", "X-Rewrite-URL", "X-Forwarded-Prefix", "X-Forwarded-Scheme", "X-Forwarded-Port",
        "X-Forwarded-Server", "X-Host", "X-Original-Host", "X-HTTP-Method-Override", "X-HTTP-Method",
        "X-Method-Override", "X-Forwarded-Path", "X-Original-URI", "X-Forwarded-SSL", "Front-End-HTTPS",
    ]

    @Test("Override fields from a client that is not a trusted proxy never reach the origin")
    func overridesDropped() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "ok") }
        let proxy = try await ProxyHarness(origin: origin)
        _ = try await proxy.send("/o", headers: Self.overrides.map { ($0, "/admin") })
        let sent = try #require(origin.requests.first)
        for name in Self.overrides {
            #expect(sent.headerFields[values: HTTPField.Name(name)!].isEmpty, "\(name) reached the origin")
        }
        try await proxy.stop()
    }

    @Test("A trusted 127.0.0.1 is trusted as the IPv4-mapped peer ::ffff:127.0.0.1 of a dual-stack listener")
    func trustedMappedPeer() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "ok") }
        let proxy = try await ProxyHarness(origin: origin) {
            $0.listen = .init(host: "::", port: 0)
            $0.trustedProxies = ["127.0.0.1"]
        }
        _ = try await proxy.send("/t", headers: [("X-Forwarded-For", "203.0.113.9"), ("X-Original-URL", "/kept")])
        let sent = try #require(origin.requests.first)
        #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-For")!].first == "203.0.113.9")
        #expect(sent.headerFields[values: HTTPField.Name("X-Original-URL")!] == ["/kept"])
        try await proxy.stop()
    }

    @Test("A fragment in the request target is neither keyed nor forwarded")
    func fragment() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "ok") }
        let proxy = try await ProxyHarness(origin: origin)
        let received = try await RawClient.exchange(
            "GET /a?q=1#frag HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            port: proxy.port
        )
        #expect(RawClient.statuses(in: received) == [200])
        #expect(origin.requests.map(\.path) == ["/a?q=1"])
        #expect(try await proxy.send("/a?q=1").cacheStatus.contains("hit"))
        #expect(origin.requests.count == 1)
        try await proxy.stop()
    }

    @Test("An extension method (M-SEARCH) goes to the origin as it is spelt, is not cached, and invalidates")
    func extensionMethod() async throws {
        let origin = try await TestOrigin.start { request in
            .init(fields: [("Cache-Control", "max-age=60")], body: request.method.rawValue)
        }
        let proxy = try await ProxyHarness(origin: origin)
        _ = try await proxy.send("/m")
        #expect(try await proxy.send("/m").cacheStatus.contains("hit"))
        for _ in 0..<2 {
            let received = try await RawClient.exchange(
                "M-SEARCH /m HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                port: proxy.port
            )
            #expect(RawClient.statuses(in: received) == [200])
            #expect(received.hasSuffix("M-SEARCH"), "\(received)")
        }
        #expect(origin.requests.map(\.method.rawValue) == ["GET", "M-SEARCH", "M-SEARCH"])
        // Its 200 invalidated what GET stored (RFC 9111 §4.4).
        #expect(try await proxy.send("/m").cacheStatus.contains("fwd=uri-miss"))
        try await proxy.stop()
    }

    @Test("From a trusted proxy, Forwarded and X-Forwarded-For are kept and extended, and X-Forwarded-Proto kept")
    func trustedForwarding() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "ok") }
        let proxy = try await ProxyHarness(origin: origin) { $0.trustedProxies = ["127.0.0.1"] }
        _ = try await proxy.send(
            "/f",
            headers: [
                ("Forwarded", "for=203.0.113.9"), ("X-Forwarded-For", "203.0.113.9"), ("X-Forwarded-Proto", "https"),
            ]
        )
        let sent = try #require(origin.requests.first)
        #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-Proto")!] == ["https"])
        let forwarded = sent.headerFields[values: HTTPField.Name("Forwarded")!]
        #expect(forwarded.first == "for=203.0.113.9")
        #expect(forwarded.count == 2)
        #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-For")!] == ["203.0.113.9", "127.0.0.1"])
        try await proxy.stop()
    }

    @Test("The requests of one connection reach the origin each with its own path and fields")
    func requestsOfOneConnection() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "ok") }
        let proxy = try await ProxyHarness(origin: origin) { $0.origin = origin.url("/base/") }
        // Pipelined on one connection: the second repeats the first's fields, the third changes
        // a value, the fourth a name's spelling.
        let requests = [
            "GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\r\n",
            "GET /b?q HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\r\n",
            "GET /c HTTP/1.1\r\nHost: x\r\nX-A: 2\r\n\r\n",
            "GET /d HTTP/1.1\r\nHost: x\r\nx-a: 2\r\nX-B: 3\r\nConnection: close\r\n\r\n",
        ]
        let received = try await RawClient.exchange(requests.joined(), port: proxy.port)
        #expect(RawClient.statuses(in: received) == [200, 200, 200, 200])
        let sent = origin.requests
        #expect(sent.map(\.path) == ["/base/a", "/base/b?q", "/base/c", "/base/d"])
        let name = try #require(HTTPField.Name("X-A"))
        #expect(sent.map { $0.headerFields[values: name] } == [["1"], ["1"], ["2"], ["2"]])
        #expect(sent.map { $0.headerFields[HTTPField.Name("X-B")!] } == [nil, nil, nil, "3"])
        try await proxy.stop()
    }

    @Test("On one connection, a request that varies from the one before is answered for its own fields")
    func variantsOfOneConnection() async throws {
        let origin = try await TestOrigin.start { request in
            .init(
                fields: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                body: "[" + (request.headerFields[.acceptLanguage] ?? "none") + "]"
            )
        }
        let proxy = try await ProxyHarness(origin: origin)
        let requests = [
            "GET /v HTTP/1.1\r\nHost: x\r\nAccept-Language: fr\r\n\r\n",
            "GET /v HTTP/1.1\r\nHost: x\r\nAccept-Language: fr\r\n\r\n",
            "GET /v HTTP/1.1\r\nHost: x\r\nAccept-Language: de\r\n\r\n",
            "GET /v HTTP/1.1\r\nHost: x\r\nAccept-Language: fr\r\nConnection: close\r\n\r\n",
        ]
        let received = try await RawClient.exchange(requests.joined(), port: proxy.port)
        let bodies = received.matches(of: #/\[(\w+)\]/#).map { String($0.output.1) }
        #expect(bodies == ["fr", "fr", "de", "fr"])
        #expect(origin.requests.count == 2)
        try await proxy.stop()
    }

    @Test("The origin's base path prefixes every request's path")
    func basePath() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "ok") }
        let proxy = try await ProxyHarness(origin: origin) { $0.origin = origin.url("/base/") }
        _ = try await proxy.send("/x/y?z=1")
        #expect(origin.requests.first?.path == "/base/x/y?z=1")
        try await proxy.stop()
    }
}
