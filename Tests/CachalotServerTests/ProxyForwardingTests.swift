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

    @Test("A client's Forwarded and X-Forwarded-* fields are replaced by the proxy's own")
    func untrustedForwarding() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "ok") }
        let proxy = try await ProxyHarness(origin: origin)
        _ = try await proxy.send(
            "/f",
            headers: [
                ("Forwarded", "for=6.6.6.6"), ("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-Host", "evil.example"),
            ]
        )
        let sent = try #require(origin.requests.first)
        #expect(
            sent.headerFields[values: HTTPField.Name("Forwarded")!] == [
                "for=127.0.0.1;host=\"127.0.0.1:\(proxy.port)\";proto=http"
            ]
        )
        #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-For")!] == ["127.0.0.1"])
        #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-Host")!] == ["127.0.0.1:\(proxy.port)"])
        try await proxy.stop()
    }

    @Test("From a trusted proxy, Forwarded and X-Forwarded-For are kept and extended")
    func trustedForwarding() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "ok") }
        let proxy = try await ProxyHarness(origin: origin) { $0.trustedProxies = ["127.0.0.1"] }
        _ = try await proxy.send("/f", headers: [("Forwarded", "for=203.0.113.9"), ("X-Forwarded-For", "203.0.113.9")])
        let sent = try #require(origin.requests.first)
        let forwarded = sent.headerFields[values: HTTPField.Name("Forwarded")!]
        #expect(forwarded.first == "for=203.0.113.9")
        #expect(forwarded.count == 2)
        #expect(sent.headerFields[values: HTTPField.Name("X-Forwarded-For")!] == ["203.0.113.9", "127.0.0.1"])
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
