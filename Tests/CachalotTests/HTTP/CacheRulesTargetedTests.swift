import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("CacheRules: targeted cache-control fields (RFC 9213)")
struct CacheRulesTargetedTests {
    static let cdn = HTTPField.Name("CDN-Cache-Control")!
    static let own = HTTPField.Name("Cachalot-Cache-Control")!
    /// A proxy's rules: its own field first, then CDN-Cache-Control.
    let rules = CacheRules(isShared: true, targetedFields: [Self.own, Self.cdn])

    /// `pairs` as stored by `rules` at `Messages.start`.
    func stored(_ pairs: [(String, String)], rules: CacheRules? = nil, status: Int = 200) -> StoredResponse {
        StoredResponse(
            request: Messages.request(),
            response: Messages.response(status, pairs),
            requestTime: Messages.start,
            responseTime: Messages.start,
            targetedFields: (rules ?? self.rules).targetedFields
        )
    }

    func canStore(_ pairs: [(String, String)], rules: CacheRules? = nil) -> Bool {
        (rules ?? self.rules).canStore(Messages.response(200, pairs), for: Messages.request())
    }

    @Test("a targeted field overrides Cache-Control: no-store, stored and fresh for its max-age")
    func precedence() {
        let pairs = [("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60")]
        #expect(self.canStore(pairs))
        let stored = self.stored(pairs)
        #expect(stored.freshnessLifetime(isShared: true) == 60)
        #expect(self.rules.decision(for: Messages.request(), stored: stored, at: Messages.at(59)) == .useStored(.fresh))
        #expect(self.rules.decision(for: Messages.request(), stored: stored, at: Messages.at(60)) == .validate)
        // The response as relayed is unchanged.
        #expect(stored.response.headerFields[.cacheControl] == "no-store")
        #expect(stored.response.headerFields[Self.cdn] == "max-age=60")
    }

    @Test("with no target list (the default), a targeted field changes nothing")
    func off() {
        #expect(CacheRules.sharedCache.targetedFields.isEmpty)
        let pairs = [("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60")]
        #expect(!self.canStore(pairs, rules: .sharedCache))
        let pairs10 = [("Cache-Control", "max-age=10"), ("CDN-Cache-Control", "max-age=60")]
        #expect(self.stored(pairs10, rules: .sharedCache).freshnessLifetime(isShared: true) == 10)
        // A field not on the list is ignored too.
        let onlyOwn = CacheRules(isShared: true, targetedFields: [Self.own])
        #expect(!self.canStore(pairs, rules: onlyOwn))
        #expect(self.stored(pairs10, rules: onlyOwn).freshnessLifetime(isShared: true) == 10)
    }

    @Test(
        "a targeted value that is empty or not a Structured Fields Dictionary is ignored: Cache-Control counts",
        arguments: [
            "", "   ", "max-age=60,", "Max-Age=60", "max-age=60, private=\"x", "max-age=60;", "max-age=60 private",
            "max-age=(60", "max-age=?2", "max-age=1234567890123456", "max-age=60, , public", "max-age=\"a\tb\"",
            "max-age=:abc", "1max-age=60", "max-age=6.0000",
        ]
    )
    func invalid(value: String) {
        let pairs = [("Cache-Control", "max-age=10"), ("CDN-Cache-Control", value)]
        #expect(self.stored(pairs).freshnessLifetime(isShared: true) == 10)
        #expect(!self.canStore([("Cache-Control", "no-store"), ("CDN-Cache-Control", value)]))
    }

    @Test(
        "a targeted field whose numeric directive has another type is ignored whole (cdn-cc-invalid-sh-type-wrong)",
        arguments: ["max-age=\"10000\"", "max-age", "max-age=10000, s-maxage=tok", "stale-if-error=\"60\", max-age=60"]
    )
    func wrongType(value: String) {
        #expect(!self.canStore([("Cache-Control", "no-store"), ("CDN-Cache-Control", value)]))
        let pairs = [("Cache-Control", "max-age=10"), ("CDN-Cache-Control", value)]
        #expect(self.stored(pairs).freshnessLifetime(isShared: true) == 10)
    }

    @Test("the first field of the target list with a valid value wins")
    func order() {
        let both = [("CDN-Cache-Control", "max-age=60"), ("Cachalot-Cache-Control", "max-age=30")]
        #expect(self.stored(both).freshnessLifetime(isShared: true) == 30)
        let reversed = CacheRules(isShared: true, targetedFields: [Self.cdn, Self.own])
        #expect(self.stored(both, rules: reversed).freshnessLifetime(isShared: true) == 60)
        // The first one invalid: the next.
        let firstInvalid = [("CDN-Cache-Control", "max-age=60"), ("Cachalot-Cache-Control", "max-age=30,")]
        #expect(self.stored(firstInvalid).freshnessLifetime(isShared: true) == 60)
        // Only the later one present.
        #expect(self.stored([("CDN-Cache-Control", "max-age=60")]).freshnessLifetime(isShared: true) == 60)
    }

    @Test("Expires is ignored with a targeted field, even one with no freshness (RFC 9213 §2.2, §3.1)")
    func expiresIgnored() {
        let pairs = [("Expires", Messages.date(3_600)), ("CDN-Cache-Control", "none")]
        #expect(self.stored(pairs).freshnessLifetime(isShared: true) == 0)
        #expect(self.stored([("Expires", Messages.date(3_600))]).freshnessLifetime(isShared: true) == 3_600)
        // Stored by all but CDN caches, as RFC 9213 §3.1's example says.
        let example = [("Cache-Control", "no-store"), ("CDN-Cache-Control", "none")]
        #expect(self.canStore(example))
        #expect(!self.canStore(example, rules: .sharedCache))
        // A 302 is storable only with explicit freshness, which Expires no longer gives.
        let redirect = Messages.response(302, [("Expires", Messages.date(60)), ("CDN-Cache-Control", "public=?0")])
        #expect(!self.rules.canStore(redirect, for: Messages.request()))
        #expect(CacheRules.sharedCache.canStore(redirect, for: Messages.request()))
    }

    @Test("the directives of a targeted field mean what they mean in Cache-Control")
    func directives() {
        #expect(!self.canStore([("Cache-Control", "public, max-age=60"), ("CDN-Cache-Control", "no-store")]))
        #expect(!self.canStore([("Cache-Control", "public, max-age=60"), ("CDN-Cache-Control", "private")]))
        #expect(self.stored([("CDN-Cache-Control", "max-age=60, s-maxage=20")]).freshnessLifetime(isShared: true) == 20)
        let noCache = self.stored([("Cache-Control", "max-age=60"), ("CDN-Cache-Control", "no-cache, max-age=60")])
        #expect(self.rules.decision(for: Messages.request(), stored: noCache, at: Messages.at(1)) == .validate)
        #expect(noCache.cacheControl.isNoCache)
        // A decimal is not coerced: it is the wrong type, and the field is ignored whole.
        let decimal = self.stored([("Cache-Control", "max-age=60"), ("CDN-Cache-Control", "max-age=1.5")])
        #expect(decimal.freshnessLifetime(isShared: true) == 60)
        // must-revalidate forbids stale answers, even on an origin error.
        let mustRevalidate = self.stored([
            ("Cache-Control", "max-age=1, stale-if-error=600"), ("CDN-Cache-Control", "max-age=1, must-revalidate"),
        ])
        #expect(!self.rules.mayUseStaleOnError(mustRevalidate, for: Messages.request(), at: Messages.at(5)))
        let staleIfError = self.stored([
            ("Cache-Control", "max-age=1"), ("CDN-Cache-Control", "max-age=1, stale-if-error=600"),
        ])
        #expect(self.rules.mayUseStaleOnError(staleIfError, for: Messages.request(), at: Messages.at(5)))
    }

    @Test("the target list is kept with the stored response: in its binary form and through a 304")
    func kept() throws {
        let stored = self.stored([
            ("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60"), ("ETag", "\"a\""),
        ])
        let decoded = try #require(StoredResponse(decoding: stored.encoded()))
        #expect(decoded == stored)
        #expect(decoded.freshnessLifetime(isShared: true) == 60)
        #expect(decoded.facts.targets == [Self.own, Self.cdn])
        let notModified = Messages.response(304, [("ETag", "\"a\""), ("CDN-Cache-Control", "max-age=120")])
        let freshened = try #require(
            self.rules.freshened(
                decoded,
                with: notModified,
                requestTime: Messages.at(10),
                responseTime: Messages.at(10)
            )
        )
        #expect(freshened.freshnessLifetime(isShared: true) == 120)
        // Stored without the list, the same head reads by Cache-Control alone, and differs.
        let plain = self.stored(
            [("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60"), ("ETag", "\"a\"")],
            rules: .sharedCache
        )
        #expect(plain.freshnessLifetime(isShared: true) == 0)
        #expect(plain != stored)
    }

    @Test(
        "Structured Fields Dictionary members as directives",
        arguments: [
            ("max-age=60", "max-age", "60"), ("no-cache=\"set-cookie, a\"", "no-cache", "set-cookie, a"),
            ("no-store", "no-store", nil), ("no-store=?1", "no-store", nil), ("a=tok/en:x", "a", "tok/en:x"),
            ("max-age=60;x=1;y", "max-age", "60"), ("max-age=-5", "max-age", "-5"), ("a=\"q\\\"b\\\\\"", "a", "q\"b\\"),
            ("  max-age=60  ", "max-age", "60"), ("*a_b-c.d=1", "*a_b-c.d", "1"),
        ] as [(String, String, String?)]
    )
    func dictionary(value: String, name: String, argument: String?) throws {
        let members = try #require(StructuredFieldDictionary.parse([value]))
        #expect(members.count == 1)
        #expect(members.first?.name == name)
        #expect(members.first?.argument == argument)
    }

    @Test("a key given twice keeps its last value; Boolean false leaves the directive out; lines are one list")
    func dictionaryEdges() throws {
        let twice = try #require(StructuredFieldDictionary.parse(["max-age=60, public, max-age=30"]))
        #expect(twice.map(\.name) == ["max-age", "public"])
        #expect(twice.first?.argument == "30")
        let falseValue = try #require(StructuredFieldDictionary.parse(["no-store=?0, max-age=5"]))
        #expect(falseValue.map(\.name) == ["max-age"])
        let lines = try #require(StructuredFieldDictionary.parse(["max-age=5", "public"]))
        #expect(lines.map(\.name) == ["max-age", "public"])
        let inner = try #require(StructuredFieldDictionary.parse(["a=(1 \"x\" tok);p=1, b=:aGk=:"]))
        #expect(inner.map(\.name) == ["a", "b"])
        #expect(inner.map(\.argument) == ["", ""])
        #expect(StructuredFieldDictionary.parse(["max-age=5", ""]) == nil)
        #expect(StructuredFieldDictionary.parse([""]) == nil)
    }
}
