import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("StoredResponse: Vary's field values normalized (RFC 9110 §12.5.5, RFC 9111 §4.1)")
struct StoredResponseVaryTests {
    /// A response varying on `name`, stored for a request with the lines `stored`; whether a
    /// request with the lines `asked` matches it, and whether both have the same variant key.
    static func matches(_ name: String, stored: [String], asked: [String]) -> (matches: Bool, sameKey: Bool) {
        let storedRequest = Messages.request(stored.map { (name, $0) })
        let askedRequest = Messages.request(asked.map { (name, $0) })
        let response = Messages.stored(200, [("Cache-Control", "max-age=60"), ("Vary", name)], request: storedRequest)
        let url = "https://example.com/a?b=1"
        let names = [name.lowercased()]
        let sameKey =
            CacheKey.variant(of: url, names: names, request: storedRequest)
            == CacheKey.variant(of: url, names: names, request: askedRequest)
        return (response.matches(askedRequest), sameKey)
    }

    @Test(
        "Accept-Encoding, Accept-Language and Accept-Charset match in any case and order",
        arguments: [
            ("Accept-Encoding", ["gzip, br"], ["BR,gzip"]),
            ("Accept-Encoding", ["gzip", "br"], ["br, gzip"]),
            ("Accept-Encoding", ["gzip;q=1.0, identity; q=0.5"], [" identity;q=0.5 ,  GZIP; q=1.0 "]),
            ("Accept-Encoding", ["gzip,, br"], ["br", "", "gzip"]),
            ("Accept-Language", ["en-US, fr;q=0.5"], ["fr; q=0.5", "EN-us"]),
            ("Accept-Charset", ["utf-8, iso-8859-1;q=0.5"], ["ISO-8859-1;q=0.5, UTF-8"]),
        ]
    )
    func unorderedLists(name: String, stored: [String], asked: [String]) {
        let (matches, sameKey) = Self.matches(name, stored: stored, asked: asked)
        #expect(matches)
        #expect(sameKey)
    }

    @Test(
        "other fields match with whitespace around commas and at the ends removed, lines joined",
        arguments: [
            ("Accept", ["text/html ,image/png"], ["text/html, image/png"]),
            ("Accept", ["text/html", "image/png"], ["text/html,image/png"]),
            ("Accept", [" text/html,\timage/png\t"], ["text/html , image/png"]),
            ("User-Agent", ["Mozilla/5.0  (X11;  Linux)"], ["Mozilla/5.0 (X11; Linux)"]),
            ("X-Custom", ["a,", "b"], ["a, , b"]),
        ]
    )
    func lists(name: String, stored: [String], asked: [String]) {
        let (matches, sameKey) = Self.matches(name, stored: stored, asked: asked)
        #expect(matches)
        #expect(sameKey)
    }

    @Test(
        "other fields keep their case, their order, and their quoted strings",
        arguments: [
            ("Accept", ["text/html, image/png"], ["image/png, text/html"]),
            ("Accept", ["text/html"], ["Text/HTML"]),
            ("Cookie", ["a=1; b=2"], ["b=2; a=1"]),
            ("Cookie", ["a=1"], ["A=1"]),
            ("User-Agent", ["Agent/1"], ["agent/1"]),
            ("Accept", ["text/plain; x=\"a , b\""], ["text/plain; x=\"a, b\""]),
            ("Accept", ["text/plain; x=\"a  b\""], ["text/plain; x=\"a b\""]),
            ("Accept-Encoding", ["gzip"], ["gzip, br"]),
            ("Accept-Language", ["en"], ["en;q=0.5"]),
        ]
    )
    func distinct(name: String, stored: [String], asked: [String]) {
        let (matches, sameKey) = Self.matches(name, stored: stored, asked: asked)
        #expect(!matches)
        #expect(!sameKey)
    }

    @Test("the normalized value is what is stored, and it survives the binary form")
    func stored() throws {
        let request = Messages.request([
            ("Accept-Encoding", "GZIP, br"), ("Accept", "text/html ,image/png"), ("Accept", " */*"),
        ])
        let response = Messages.stored(
            200,
            [("Cache-Control", "max-age=60"), ("Vary", "Accept-Encoding, Accept")],
            request: request
        )
        #expect(
            response.varyingFields == [
                StoredResponse.VaryingField(name: "accept-encoding", value: "br, gzip"),
                StoredResponse.VaryingField(name: "accept", value: "text/html, image/png, */*"),
            ]
        )
        let decoded = try #require(StoredResponse(decoding: response.encoded()))
        #expect(
            decoded.matches(Messages.request([("Accept-Encoding", "br,gzip"), ("Accept", "text/html, image/png,*/*")]))
        )
    }

    @Test("a value stored before normalization that it leaves as it is still matches")
    func earlierValues() {
        // As the earlier version stored them: lines joined with ", ", whitespace runs collapsed.
        var response = Messages.stored(200, [("Cache-Control", "max-age=60"), ("Vary", "Accept, Accept-Encoding")])
        response.varyingFields = [
            StoredResponse.VaryingField(name: "accept", value: "text/html, image/png"),
            StoredResponse.VaryingField(name: "accept-encoding", value: "gzip"),
        ]
        #expect(response.matches(Messages.request([("Accept", "text/html, image/png"), ("Accept-Encoding", "gzip")])))
    }
}
