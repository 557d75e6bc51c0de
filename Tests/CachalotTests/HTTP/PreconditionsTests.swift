import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("Preconditions: a client's conditional request (RFC 9110 §13.2.2)")
struct PreconditionsTests {
    /// The selected representation: strong ETag "v1", modified 1,000 s before `start`.
    static let response = Messages.response(
        200,
        [
            ("Date", Messages.date(0)), ("ETag", "\"v1\""), ("Last-Modified", Messages.date(-1_000)),
            ("Content-Type", "text/plain"), ("Content-Length", "5"), ("Cache-Control", "max-age=60"),
        ]
    )
    static let weakResponse = Messages.response(200, [("ETag", "W/\"v1\""), ("Last-Modified", Messages.date(-1_000))])

    static func evaluate(
        _ pairs: [(String, String)],
        method: HTTPRequest.Method = .get,
        response: HTTPResponse = Self.response
    ) -> Preconditions.Outcome {
        Preconditions.evaluate(Messages.request("https://example.com/a", method: method, pairs), against: response)
    }

    @Test("a request without preconditions proceeds")
    func unconditional() {
        #expect(Self.evaluate([]) == .proceed)
        #expect(Self.evaluate([("Range", "bytes=0-1")]) == .proceed)
    }

    @Test("If-Match: strong comparison; * matches; no match is 412")
    func ifMatch() {
        #expect(Self.evaluate([("If-Match", "\"v1\"")]) == .proceed)
        #expect(Self.evaluate([("If-Match", "\"v0\", \"v1\"")]) == .proceed)
        #expect(Self.evaluate([("If-Match", "\"v0\""), ("If-Match", "\"v1\"")]) == .proceed)
        #expect(Self.evaluate([("If-Match", "*")]) == .proceed)
        #expect(Self.evaluate([("If-Match", "\"v2\"")]) == .preconditionFailed)
        // Strong comparison: a weak tag on either side never matches.
        #expect(Self.evaluate([("If-Match", "W/\"v1\"")]) == .preconditionFailed)
        #expect(Self.evaluate([("If-Match", "\"v1\"")], response: Self.weakResponse) == .preconditionFailed)
        #expect(Self.evaluate([("If-Match", "*")], response: Self.weakResponse) == .proceed)
        // No ETag, or a field that is not a list of tags: nothing matches.
        #expect(Self.evaluate([("If-Match", "\"v1\"")], response: Messages.response(200)) == .preconditionFailed)
        #expect(Self.evaluate([("If-Match", "v1")]) == .preconditionFailed)
        #expect(Self.evaluate([("If-Match", "\"v1\"")], method: .put) == .proceed)
        #expect(Self.evaluate([("If-Match", "\"v2\"")], method: .put) == .preconditionFailed)
    }

    @Test(
        "If-Unmodified-Since: a later Last-Modified is 412; ignored beside If-Match, invalid, or without Last-Modified"
    )
    func ifUnmodifiedSince() {
        #expect(Self.evaluate([("If-Unmodified-Since", Messages.date(-1_000))]) == .proceed)
        #expect(Self.evaluate([("If-Unmodified-Since", Messages.date(-500))]) == .proceed)
        #expect(Self.evaluate([("If-Unmodified-Since", Messages.date(-1_001))]) == .preconditionFailed)
        #expect(Self.evaluate([("If-Unmodified-Since", Messages.date(-1_001))], method: .delete) == .preconditionFailed)
        // If-Match takes its place.
        #expect(Self.evaluate([("If-Match", "\"v1\""), ("If-Unmodified-Since", Messages.date(-1_001))]) == .proceed)
        // Not a date, a list of dates, or no Last-Modified: ignored.
        #expect(Self.evaluate([("If-Unmodified-Since", "yesterday")]) == .proceed)
        let twoDates = [("If-Unmodified-Since", Messages.date(-2_000)), ("If-Unmodified-Since", Messages.date(-2_000))]
        #expect(Self.evaluate(twoDates) == .proceed)
        let noLastModified = Messages.response(200, [("ETag", "\"v1\"")])
        #expect(Self.evaluate([("If-Unmodified-Since", Messages.date(-2_000))], response: noLastModified) == .proceed)
    }

    @Test("If-None-Match: weak comparison; * matches; a match is 304 for GET and HEAD, 412 for other methods")
    func ifNoneMatch() {
        #expect(Self.evaluate([("If-None-Match", "\"v1\"")]) == .notModified)
        #expect(Self.evaluate([("If-None-Match", "W/\"v1\"")]) == .notModified)
        #expect(Self.evaluate([("If-None-Match", "\"v1\"")], response: Self.weakResponse) == .notModified)
        #expect(Self.evaluate([("If-None-Match", "\"a\", W/\"v1\"")], method: .head) == .notModified)
        #expect(Self.evaluate([("If-None-Match", "*")]) == .notModified)
        #expect(Self.evaluate([("If-None-Match", "\"v2\"")]) == .proceed)
        #expect(Self.evaluate([("If-None-Match", "\"v1\"")], method: .post) == .preconditionFailed)
        #expect(Self.evaluate([("If-None-Match", "*")], method: .put) == .preconditionFailed)
        #expect(Self.evaluate([("If-None-Match", "\"v2\"")], method: .put) == .proceed)
        // A tag may hold a comma; the quotes are part of the syntax.
        let comma = Messages.response(200, [("ETag", "\"a,b\"")])
        #expect(Self.evaluate([("If-None-Match", "\"a,b\"")], response: comma) == .notModified)
        #expect(Self.evaluate([("If-None-Match", "\"a\", \"b\"")], response: comma) == .proceed)
        #expect(Self.evaluate([("If-None-Match", "v1")]) == .proceed)
    }

    @Test("If-Modified-Since: GET and HEAD only, without If-None-Match, with valid dates on both sides")
    func ifModifiedSince() {
        #expect(Self.evaluate([("If-Modified-Since", Messages.date(-1_000))]) == .notModified)
        #expect(Self.evaluate([("If-Modified-Since", Messages.date(-10))], method: .head) == .notModified)
        #expect(Self.evaluate([("If-Modified-Since", Messages.date(-1_001))]) == .proceed)
        #expect(Self.evaluate([("If-Modified-Since", Messages.date(-10))], method: .post) == .proceed)
        // If-None-Match takes its place, even when it does not match.
        #expect(Self.evaluate([("If-None-Match", "\"v2\""), ("If-Modified-Since", Messages.date(-10))]) == .proceed)
        #expect(Self.evaluate([("If-Modified-Since", "Sun, 06 Nov 94 08:49:37 GMT")]) == .proceed)
        #expect(Self.evaluate([("If-Modified-Since", "0")]) == .proceed)
        let invalidLastModified = Messages.response(200, [("Last-Modified", "last week")])
        #expect(Self.evaluate([("If-Modified-Since", Messages.date(-10))], response: invalidLastModified) == .proceed)
        // Obsolete forms are read, a two-digit year against the response's Date.
        let asctime = "Fri Jan 15 07:59:00 2027"
        #expect(Self.evaluate([("If-Modified-Since", asctime)]) == .notModified)
        #expect(Self.evaluate([("If-Modified-Since", "Friday, 15-Jan-27 07:59:00 GMT")]) == .notModified)
    }

    @Test("the order of RFC 9110 §13.2.2: a failed If-Match or If-Unmodified-Since comes before a 304")
    func order() {
        let failedMatch = [("If-Match", "\"v2\""), ("If-None-Match", "\"v1\"")]
        #expect(Self.evaluate(failedMatch) == .preconditionFailed)
        let failedDate = [("If-Unmodified-Since", Messages.date(-2_000)), ("If-Modified-Since", Messages.date(0))]
        #expect(Self.evaluate(failedDate) == .preconditionFailed)
        let both = [("If-Match", "\"v1\""), ("If-None-Match", "\"v1\"")]
        #expect(Self.evaluate(both) == .notModified)
        #expect(Self.evaluate(both, method: .put) == .preconditionFailed)
    }

    @Test("nothing is evaluated for a response other than 2xx", arguments: [304, 404, 412, 500, 301])
    func notSuccessful(status: Int) {
        let response = Messages.response(status, [("ETag", "\"v1\""), ("Last-Modified", Messages.date(-1_000))])
        #expect(Self.evaluate([("If-Match", "\"v2\"")], response: response) == .proceed)
        #expect(Self.evaluate([("If-None-Match", "\"v1\"")], response: response) == .proceed)
        #expect(Self.evaluate([("If-Modified-Since", Messages.date(0))], response: response) == .proceed)
    }

    @Test("the 304 carries the fields RFC 9110 §15.4.5 names and no body fields")
    func notModifiedResponse() {
        let response = Messages.response(
            200,
            [
                ("Date", Messages.date(0)), ("ETag", "\"v1\""), ("Last-Modified", Messages.date(-1_000)),
                ("Content-Type", "text/plain"), ("Content-Length", "5"), ("Cache-Control", "max-age=60"),
                ("Expires", Messages.date(60)), ("Vary", "Accept"), ("Content-Location", "/a.txt"),
                ("Content-Encoding", "gzip"), ("Age", "3"), ("Set-Cookie", "a=1"), ("Vary", "Accept-Language"),
            ]
        )
        let notModified = Preconditions.notModified(from: response)
        #expect(notModified.status == .notModified)
        #expect(
            notModified.headerFields.map(\.name.canonicalName) == [
                "date", "etag", "cache-control", "expires", "vary", "content-location", "age", "vary",
            ]
        )
        #expect(notModified.headerFields[values: .vary] == ["Accept", "Accept-Language"])
        // Without ETag, Last-Modified is what a cache can update by.
        let withoutETag = Messages.response(200, [("Last-Modified", Messages.date(-1_000)), ("Content-Length", "5")])
        #expect(
            Preconditions.notModified(from: withoutETag).headerFields
                == Messages.fields([("Last-Modified", Messages.date(-1_000))])
        )
    }
}
