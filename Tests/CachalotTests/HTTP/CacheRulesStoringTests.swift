import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("CacheRules: storing (RFC 9111 §3)")
struct CacheRulesStoringTests {
    let rules = CacheRules.privateCache
    let shared = CacheRules.sharedCache

    @Test("a 200 with explicit freshness, or heuristically cacheable, may be stored")
    func storable() {
        #expect(self.rules.canStore(Messages.response(200, [("Cache-Control", "max-age=60")]), for: Messages.request()))
        #expect(self.rules.canStore(Messages.response(200), for: Messages.request()))
        #expect(self.rules.canStore(Messages.response(404), for: Messages.request()))
        #expect(self.rules.canStore(Messages.response(301), for: Messages.request()))
    }

    @Test("other statuses need explicit freshness; 206 and 1xx never")
    func statuses() {
        #expect(!self.rules.canStore(Messages.response(302), for: Messages.request()))
        #expect(self.rules.canStore(Messages.response(302, [("Cache-Control", "max-age=5")]), for: Messages.request()))
        #expect(self.rules.canStore(Messages.response(500, [("Expires", Messages.date(60))]), for: Messages.request()))
        #expect(!self.rules.canStore(Messages.response(206, [("Cache-Control", "max-age=5")]), for: Messages.request()))
        #expect(!self.rules.canStore(Messages.response(500), for: Messages.request()))
    }

    @Test("only GET responses are stored")
    func methods() {
        let response = Messages.response(200, [("Cache-Control", "max-age=60")])
        #expect(!self.rules.canStore(response, for: Messages.request(method: .post)))
        #expect(!self.rules.canStore(response, for: Messages.request(method: .head)))
    }

    @Test("no-store in the response or the request forbids storing")
    func noStore() {
        #expect(
            !self.rules.canStore(
                Messages.response(200, [("Cache-Control", "no-store, max-age=60")]),
                for: Messages.request()
            )
        )
        #expect(
            !self.rules.canStore(
                Messages.response(200, [("Cache-Control", "max-age=60")]),
                for: Messages.request([("Cache-Control", "no-store")])
            )
        )
    }

    @Test("must-understand lets a known status be stored despite no-store, and forbids an unknown one")
    func mustUnderstand() {
        let known = Messages.response(200, [("Cache-Control", "must-understand, no-store, max-age=60")])
        #expect(self.rules.canStore(known, for: Messages.request()))
        let unknown = Messages.response(299, [("Cache-Control", "must-understand, max-age=60")])
        #expect(!self.rules.canStore(unknown, for: Messages.request()))
    }

    @Test("Set-Cookie: a private cache stores it, a shared one does not (as nginx and Varnish)")
    func setCookie() {
        let response = Messages.response(200, [("Cache-Control", "public, max-age=60"), ("Set-Cookie", "id=1")])
        #expect(self.rules.canStore(response, for: Messages.request()))
        #expect(!self.shared.canStore(response, for: Messages.request()))
        #expect(!CacheRules(isShared: true).canStore(response, for: Messages.request()))
        // Without it, the same response is stored.
        var plain = response
        plain.headerFields[HTTPField.Name("Set-Cookie")!] = nil
        #expect(self.shared.canStore(plain, for: Messages.request()))
        // Allowed, a shared cache stores it; refused, a private one does not.
        let allowing = CacheRules(isShared: true, storesResponsesWithSetCookie: true)
        #expect(allowing.canStore(response, for: Messages.request()))
        #expect(!CacheRules(storesResponsesWithSetCookie: false).canStore(response, for: Messages.request()))
    }

    @Test("a 304's Set-Cookie is not added to the stored response unless the rules store Set-Cookie")
    func setCookieFreshened() throws {
        let stored = StoredResponse(
            request: Messages.request(),
            response: Messages.response(200, [("Cache-Control", "max-age=60"), ("ETag", "\"a\"")]),
            requestTime: Messages.start,
            responseTime: Messages.start
        )
        let notModified = Messages.response(304, [("ETag", "\"a\""), ("Set-Cookie", "id=1"), ("X-New", "1")])
        let setCookie = HTTPField.Name("Set-Cookie")!
        let freshened = try #require(
            self.shared.freshened(stored, with: notModified, requestTime: Messages.at(5), responseTime: Messages.at(5))
        )
        #expect(freshened.response.headerFields[setCookie] == nil)
        #expect(freshened.response.headerFields[HTTPField.Name("X-New")!] == "1")
        let allowing = CacheRules(isShared: true, storesResponsesWithSetCookie: true)
        let kept = try #require(
            allowing.freshened(stored, with: notModified, requestTime: Messages.at(5), responseTime: Messages.at(5))
        )
        #expect(kept.response.headerFields[setCookie] == "id=1")
    }

    @Test("private: a private cache stores it, a shared one does not")
    func privateDirective() {
        let response = Messages.response(200, [("Cache-Control", "private, max-age=60")])
        #expect(self.rules.canStore(response, for: Messages.request()))
        #expect(!self.shared.canStore(response, for: Messages.request()))
    }

    @Test("a shared cache stores an answer to Authorization only with public, must-revalidate or s-maxage")
    func authorization() {
        let request = Messages.request([("Authorization", "Bearer x")])
        #expect(!self.shared.canStore(Messages.response(200, [("Cache-Control", "max-age=60")]), for: request))
        #expect(self.shared.canStore(Messages.response(200, [("Cache-Control", "public, max-age=60")]), for: request))
        #expect(self.shared.canStore(Messages.response(200, [("Cache-Control", "s-maxage=60")]), for: request))
        #expect(
            self.shared.canStore(
                Messages.response(200, [("Cache-Control", "must-revalidate, max-age=6")]),
                for: request
            )
        )
        #expect(self.rules.canStore(Messages.response(200, [("Cache-Control", "max-age=60")]), for: request))
    }

    @Test("Vary: * is never stored, since no request can match it")
    func varyStar() {
        #expect(
            !self.rules.canStore(
                Messages.response(200, [("Cache-Control", "max-age=60"), ("Vary", "*")]),
                for: Messages.request()
            )
        )
    }

    @Test("hop-by-hop fields and those Connection names are not stored")
    func hopByHop() {
        let stored = Messages.stored(
            200,
            [("Connection", "X-Secret"), ("X-Secret", "1"), ("Keep-Alive", "timeout=5"), ("ETag", "\"a\"")]
        )
        #expect(stored.response.headerFields.map(\.name.canonicalName) == ["etag"])
    }

    @Test(
        "each hop-by-hop field alone is not stored, and a head without any keeps its fields",
        arguments: StoredResponse.hopByHopFields.sorted()
    )
    func eachHopByHopField(name: String) {
        let fields = [("Date", "Mon, 07 Dec 2026 23:00:00 GMT"), ("ETag", "\"a\""), ("Content-Length", "3")]
        let stored = Messages.stored(200, fields + [(name.uppercased(), "x")])
        #expect(stored.response.headerFields.map(\.name.canonicalName) == ["date", "etag", "content-length"])
        // Names of the same lengths that are not hop-by-hop stay.
        let alike = [("TK", "1"), ("Upgrad3", "1"), ("Connectior", "1"), ("Transfer-Encodinf", "1")]
        let kept = Messages.stored(200, fields + alike)
        #expect(kept.response.headerFields.count == fields.count + alike.count)
        #expect(StoredResponse.isHopByHop(name))
    }
}
