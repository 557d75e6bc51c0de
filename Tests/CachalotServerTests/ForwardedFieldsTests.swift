import Testing

@testable import CachalotServer

@Suite("ForwardedFields: addresses, hosts and Forwarded elements")
struct ForwardedFieldsTests {
    @Test(
        "An address has one spelling: IPv6 shortest, an IPv4-mapped one as IPv4; anything else as it is",
        arguments: [
            ("127.0.0.1", "127.0.0.1"), ("::ffff:127.0.0.1", "127.0.0.1"), ("::FFFF:10.0.0.2", "10.0.0.2"),
            ("0:0:0:0:0:0:0:1", "::1"), ("::1", "::1"), ("2001:DB8::0:1", "2001:db8::1"),
            ("lb.internal", "lb.internal"), ("", ""),
        ]
    )
    func canonicalAddress(text: String, canonical: String) {
        #expect(ForwardedFields.canonicalAddress(text) == canonical)
    }

    @Test("Connection's options: lowercased, without the whitespace around them; empty list elements skipped")
    func connectionOptions() {
        #expect(ForwardedFields.connectionOptions("keep-alive") == ["keep-alive"])
        #expect(
            ForwardedFields.connectionOptions(" Keep-Alive ,\tX-Private\t, ,,Upgrade") == [
                "keep-alive", "x-private", "upgrade",
            ]
        )
        #expect(ForwardedFields.connectionOptions("  ").isEmpty)
        #expect(ForwardedFields.connectionOptions("").isEmpty)
    }

    @Test("A Host is a name or an IP address and an optional port; nothing that could end an authority")
    func hosts() {
        for valid in ["www.example.com", "example.com:8080", "127.0.0.1", "[::1]:80", "[2001:db8::1]", "", "a-b_c~d"] {
            #expect(ForwardedFields.isValidHost(valid), "\(valid)")
        }
        for invalid in [
            "a.com/x", "a@b.com", "a.com?x", "a.com#x", "a b", "a.com:80x", "[::1", "[::1]x", "[zz]", "a:b:80",
            "ünï.com",
        ] {
            #expect(!ForwardedFields.isValidHost(invalid), "\(invalid)")
        }
    }

    @Test("host= goes from a Forwarded value, quoted strings and other parameters kept; an element left empty goes")
    func removingHost() {
        #expect(
            ForwardedFields.removingHost(from: "for=1.2.3.4;host=evil.example;proto=https")
                == "for=1.2.3.4;proto=https"
        )
        #expect(
            ForwardedFields.removingHost(from: "for=\"[::1]\";Host=\"a;b,c\", host=x, for=5.6.7.8")
                == "for=\"[::1]\", for=5.6.7.8"
        )
        #expect(ForwardedFields.removingHost(from: "by=\"a\\\"host=b\";for=x") == "by=\"a\\\"host=b\";for=x")
        #expect(ForwardedFields.removingHost(from: "host=only") == nil)
    }

    @Test("The client's validators and ranges are the proxy's own to answer, in any case; no other field is")
    func clientOwnedFields() {
        let owned = ["If-None-Match", "if-modified-since", "IF-MATCH", "If-Unmodified-Since", "If-Range", "range"]
        for name in owned { #expect(ProxyResponder.isClientOwned(name), "\(name)") }
        for name in ["If-None-Matc", "x-range", "Ranges", "If-Modified", "Accept", "", "If-Unmodified-Sincf"] {
            #expect(!ProxyResponder.isClientOwned(name), "\(name)")
        }
    }

    @Test("Hop-by-hop for the proxy: every field a cache never stores, Trailer and any Proxy-*; no other")
    func hopByHopNames() {
        let names = [
            "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "trailer",
            "proxy-authenticate", "proxy-authorization", "proxy-anything",
        ]
        for name in names { #expect(ForwardedFields.isHopByHop(name), "\(name)") }
        for name in ["x-proxy-id", "tk", "upgrades", "connectionx", "via", "content-length", "proxy"] {
            #expect(!ForwardedFields.isHopByHop(name), "\(name)")
        }
    }
}
