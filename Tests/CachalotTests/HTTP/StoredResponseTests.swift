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

    @Test("the freshness facts stored with a head are those computed from it, for every kind of head")
    func storedFacts() throws {
        let heads: [(Int, [(String, String)])] = [
            (200, [("Cache-Control", "max-age=60, s-maxage=30, must-revalidate, stale-while-revalidate=5")]),
            (200, [("Cache-Control", "no-cache=\"Set-Cookie, X-A\", private=\"X-B\", public, immutable")]),
            (200, [("Cache-Control", "max-age=1, max-age=2, proxy-revalidate, no-transform, must-understand")]),
            (200, [("Cache-Control", "no-store, stale-if-error=9, only-if-cached, max-stale, min-fresh=3")]),
            (200, [("Date", Messages.date(-100)), ("Expires", Messages.date(500)), ("Age", "40")]),
            (200, [("Date", Messages.date(0)), ("Last-Modified", Messages.date(-86_400))]),
            (404, [("Expires", "0"), ("Vary", "Accept-Encoding, Accept")]),
            (299, [("Last-Modified", Messages.date(-1_000)), ("Vary", "*")]),
        ]
        for (status, pairs) in heads {
            let stored = Messages.stored(status, pairs, delay: 2)
            let decoded = try #require(StoredResponse(decoding: stored.encoded()))
            let recomputed = FreshnessFacts(decoded.response, decoded.requestTime, decoded.responseTime, targets: [])
            #expect(decoded.facts == stored.facts, "\(pairs)")
            #expect(decoded.facts == recomputed, "\(pairs)")
            #expect(decoded == stored)
        }
    }

    @Test("facts stored by another version of the rules are computed again from the head")
    func factsOfAnotherVersion() throws {
        let stored = Messages.stored(200, [("Cache-Control", "max-age=60")])
        var bytes = [UInt8](stored.encoded())
        // After the magic and the two times: the facts' version, their length, then the date
        // and the corrected initial age, which the other version got wrong.
        bytes.replaceSubrange(20..<22, with: [0xFF, 0xFF])
        bytes.replaceSubrange(34..<42, with: withUnsafeBytes(of: (1e9).bitPattern.littleEndian, Array.init))
        let decoded = try #require(StoredResponse(decoding: Data(bytes)))
        #expect(decoded.facts == stored.facts)
        #expect(decoded.age(at: Messages.at(10)) == 10)
        // The same bytes under this version's number are taken as they are.
        bytes.replaceSubrange(20..<22, with: withUnsafeBytes(of: FreshnessFacts.version.littleEndian, Array.init))
        #expect(try #require(StoredResponse(decoding: Data(bytes))).age(at: Messages.at(10)) == 1e9 + 10)
    }

    @Test("metadata in the earlier form, without facts and with the head first, still reads")
    func earlierForm() throws {
        // "CHR1", two times, status, reason, fields, then the varying fields.
        var bytes = Array("CHR1".utf8)
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        func append(_ string: String) {
            append(UInt32(string.utf8.count))
            bytes += string.utf8
        }
        append((Messages.start.timeIntervalSince1970 - 1).bitPattern)
        append(Messages.start.timeIntervalSince1970.bitPattern)
        append(UInt16(200))
        append("OK")
        append(UInt32(2))
        for string in ["Cache-Control", "max-age=60", "Vary", "Accept"] { append(string) }
        append(UInt32(1))
        append("accept")
        bytes.append(1)
        append("image/png")
        let decoded = try #require(StoredResponse(decoding: Data(bytes)))
        #expect(decoded.response.headerFields[.cacheControl] == "max-age=60")
        #expect(decoded.freshnessLifetime(isShared: false) == 60)
        #expect(decoded.age(at: Messages.start) == 1)
        #expect(decoded.varyingFields == [StoredResponse.VaryingField(name: "accept", value: "image/png")])
        #expect(decoded.matches(Messages.request([("Accept", "image/png")])))
        #expect(!decoded.matches(Messages.request([("Accept", "image/jpeg")])))
    }

    @Test(
        "a time or number of seconds that is not finite or is beyond 10^13 s makes the metadata unreadable",
        arguments: [Double.nan, .infinity, -.infinity, 1.5e13, -5.8e126]
    )
    func secondsOutOfRange(seconds: Double) throws {
        let encoded = [UInt8](Messages.stored(200, [("Cache-Control", "max-age=60")]).encoded())
        let value = withUnsafeBytes(of: seconds.bitPattern.littleEndian, Array.init)
        // The request time, the response time, then (after the facts' version and length) the
        // facts' date, corrected initial age and two lifetimes.
        for offset in [4, 12, 26, 34, 42, 50] {
            var bytes = encoded
            bytes.replaceSubrange(offset..<(offset + 8), with: value)
            #expect(StoredResponse(decoding: Data(bytes)) == nil, "at \(offset)")
        }
        // With facts of another version, recomputed from the times.
        var bytes = encoded
        bytes.replaceSubrange(20..<22, with: [0xFF, 0xFF])
        bytes.replaceSubrange(4..<12, with: value)
        #expect(StoredResponse(decoding: Data(bytes)) == nil)
        bytes.replaceSubrange(4..<12, with: withUnsafeBytes(of: (-1e13).bitPattern.littleEndian, Array.init))
        let decoded = try #require(StoredResponse(decoding: Data(bytes)))
        #expect(decoded.age(at: Messages.at(0)).magnitude < 1e14)
    }

    @Test("a field name that is not a token makes the metadata unreadable")
    func fieldNameNotAToken() throws {
        let encoded = Messages.stored(200, [("X-Name", "v")]).encoded()
        var bytes = [UInt8](encoded)
        let index = try #require(bytes.firstIndex(of: UInt8(ascii: "X")))
        bytes[index] = UInt8(ascii: " ")
        #expect(StoredResponse(decoding: Data(bytes)) == nil)
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

    @Test("a request's key, made of its parts, equals and hashes as the key string it spells")
    func responseKeys() throws {
        let request = HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/a?b=c")
        let parts = try #require(ResponseKey(of: request))
        let whole = ResponseKey("https://example.com/a?b=c")
        #expect(parts == whole && whole == parts)
        #expect(parts.hashValue == whole.hashValue)
        #expect(parts.string == "https://example.com/a?b=c")
        // A request not in key form has the key of its normalized URL.
        let spelled = HTTPRequest(method: .get, scheme: "HTTPS", authority: "Example.com:443", path: "/a?b=c")
        #expect(ResponseKey(of: spelled) == parts)
        #expect(
            ResponseKey(of: HTTPRequest(method: .get, scheme: "http", authority: "example.com", path: "/a?b=c"))
                != parts
        )
        #expect(
            ResponseKey(of: HTTPRequest(method: .get, scheme: "https", authority: "example.co", path: "m/a?b=c"))
                != parts
        )
        #expect(ResponseKey(of: HTTPRequest(method: .get, scheme: "ftp", authority: "example.com", path: "/a")) == nil)
        // Variants of either form agree with CacheKey's.
        let french = Messages.request([("Accept-Language", "fr")])
        let variant = parts.variant(names: ["accept-language"], request: french)
        #expect(variant == whole.variant(names: ["accept-language"], request: french))
        #expect(variant.hashValue == whole.variant(names: ["accept-language"], request: french).hashValue)
        #expect(variant.string == CacheKey.variant(of: whole.string, names: ["accept-language"], request: french))
        #expect(variant != parts)
        // A key transform applies to the key string.
        let transformed = ResponseKey(of: request) { $0.replacingOccurrences(of: "?b=c", with: "") }
        #expect(transformed == ResponseKey("https://example.com/a"))
    }
}
