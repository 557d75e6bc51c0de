import CachalotTesting
import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("StoredResponse and CacheKey")
struct StoredResponseTests {
    @Test("the binary form reads back as the same response")
    func roundTrip() throws {
        let request = Messages.request([("Accept-Language", "fr")])
        let stored = Messages.stored(
            203,
            [
                ("Cache-Control", "max-age=5"), ("Vary", "Accept-Language, Accept"), ("Set-Cookie", "a=1"),
                ("Set-Cookie", "b=2"),
            ],
            request: request,
            delay: 1.5
        )
        let decoded = try #require(StoredResponse(decoding: stored.encoded()))
        #expect(decoded == stored)
        #expect(
            decoded.varyingFields == [
                StoredResponse.VaryingField(name: "accept-language", value: "fr"),
                StoredResponse.VaryingField(name: "accept", value: nil),
            ]
        )
        #expect(decoded.response.headerFields[values: .setCookie] == ["a=1", "b=2"])
    }

    @Test("damaged or foreign metadata reads as nothing, whatever its bytes")
    func damaged() {
        let encoded = Messages.stored(200, [("ETag", "\"x\"")]).encoded()
        #expect(StoredResponse(decoding: Data()) == nil)
        #expect(StoredResponse(decoding: Data("CHV1\nvary".utf8)) == nil)
        #expect(StoredResponse(decoding: encoded.dropLast()) == nil)
        #expect(StoredResponse(decoding: encoded + Data([0])) == nil)
        var random = SeededGenerator(seed: 7)
        for _ in 0..<2_000 {
            var bytes = [UInt8](encoded)
            bytes[Int.random(in: 4..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            _ = StoredResponse(decoding: Data(bytes))  // must not crash
        }
    }

    @Test("text beyond ASCII reads back; bytes that are not UTF-8 make the metadata unreadable")
    func textBeyondASCII() throws {
        let stored = Messages.stored(200, [("Content-Disposition", "attachment; filename=\"café.jpg\"")])
        let encoded = stored.encoded()
        let decoded = try #require(StoredResponse(decoding: encoded))
        #expect(decoded.response.headerFields[.contentDisposition] == "attachment; filename=\"café.jpg\"")
        // "é" is 0xC3 0xA9; 0xC3 followed by "." is no UTF-8.
        var bytes = [UInt8](encoded)
        let index = try #require(bytes.firstIndex(of: 0xA9))
        bytes[index] = UInt8(ascii: ".")
        #expect(StoredResponse(decoding: Data(bytes)) == nil)
    }

    @Test("changing a part of a stored response recomputes its freshness, and copies stay as they were")
    func settersRecomputeFreshness() {
        var stored = Messages.stored(200, [("Cache-Control", "max-age=5")])
        let copy = stored
        stored.response.headerFields[.cacheControl] = "max-age=60"
        #expect(stored.freshnessLifetime(isShared: false) == 60)
        #expect(copy.freshnessLifetime(isShared: false) == 5)
        #expect(stored != copy)
        let start = stored.responseTime
        stored.responseTime = start.addingTimeInterval(-30)
        #expect(stored.age(at: start) == copy.age(at: start) + 30)
    }

    @Test("keys: scheme and host in lowercase, default port dropped, empty path as /, query kept")
    func keys() {
        let request = HTTPRequest(method: .get, scheme: "HTTPS", authority: "Example.COM:443", path: "/A?q=Z")
        #expect(CacheKey.url(of: request) == "https://example.com/A?q=Z")
        #expect(CacheKey.url(of: URL(string: "http://example.com:8080")!) == "http://example.com:8080/")
        #expect(CacheKey.url(of: URL(string: "http://user:pw@example.com/x?y")!) == "http://example.com/x?y")
        #expect(CacheKey.url(of: URL(string: "relative/path")!) == nil)
        let varied = CacheKey.variant(
            of: "https://example.com/a",
            names: ["accept-language"],
            request: Messages.request([("Accept-Language", "fr")])
        )
        #expect(varied == "https://example.com/a\naccept-language: fr")
    }
}
