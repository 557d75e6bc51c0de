import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("CacheRules: freshness and age (RFC 9111 §4.2)")
struct CacheRulesFreshnessTests {
    let rules = CacheRules.privateCache

    @Test("age counts Age, the round trip, an older Date, and the time since arrival (§4.2.3)")
    func age() {
        // Sent 2 s before it arrived, 10 s old by Age, Date 5 s before arrival.
        let stored = Messages.stored(200, [("Age", "10"), ("Date", Messages.date(-5))], delay: 2)
        #expect(stored.age(at: Messages.at(0)) == 12)
        #expect(stored.age(at: Messages.at(30)) == 42)
        // A Date older than Age says wins.
        #expect(Messages.stored(200, [("Age", "1"), ("Date", Messages.date(-50))]).age(at: Messages.at(0)) == 50)
    }

    @Test(
        "an Age whose first member is not a non-negative integer is ignored (§5.1)",
        arguments: ["-5", "abc", "1.5", "", " ", "-1, 5", "abc, 5", "1.5, 5", "+5", "0x10", "5 s"]
    )
    func invalidAge(value: String) {
        #expect(Messages.stored(200, [("Age", value)]).age(at: Messages.at(0)) == 0)
        // Ignored means absent: no older, and no fresher, than without Age.
        let pairs = [("Cache-Control", "max-age=60"), ("Date", Messages.date(-5))]
        let withAge = Messages.stored(200, pairs + [("Age", value)], delay: 2)
        let without = Messages.stored(200, pairs, delay: 2)
        #expect(withAge.age(at: Messages.at(30)) == without.age(at: Messages.at(30)))
        #expect(
            self.rules.decision(for: Messages.request(), stored: withAge, at: Messages.at(54))
                == self.rules.decision(for: Messages.request(), stored: without, at: Messages.at(54))
        )
    }

    @Test(
        "a list-valued Age counts its first member (§5.1)",
        arguments: [
            [("Age", "5, 10")], [("Age", "5,10")], [("Age", " 5 , abc")], [("Age", "5"), ("Age", "10")],
            [("Age", "5"), ("Age", "-1")], [("Age", ", 5, 10")],
        ]
    )
    func listAge(pairs: [(String, String)]) {
        #expect(Messages.stored(200, pairs).age(at: Messages.at(0)) == 5)
        #expect(Messages.stored(200, pairs).age(at: Messages.at(7)) == 12)
    }

    @Test("a very large Age counts as 2³¹ seconds", arguments: ["2147483649", "99999999999999999999999999, 1"])
    func largeAge(value: String) {
        #expect(Messages.stored(200, [("Age", value)]).age(at: Messages.at(0)) == 2_147_483_648)
    }

    @Test("a Date that is not an HTTP-date counts as absent: the time the response arrived is used")
    func invalidDate() {
        // An hour before arrival, but in a form RFC 9110 does not have.
        let pairs = [("Date", "Fri, 15 Jan 27 07:00:00 GMT"), ("Expires", Messages.date(60))]
        let stored = Messages.stored(200, pairs)
        #expect(stored.date == Messages.at(0))
        #expect(stored.age(at: Messages.at(0)) == 0)
        #expect(stored.freshnessLifetime(isShared: false) == 60)
    }

    @Test("max-age is the lifetime, before Expires")
    func maxAge() {
        let stored = Messages.stored(200, [("Cache-Control", "max-age=60"), ("Expires", Messages.date(3600))])
        #expect(stored.freshnessLifetime(isShared: false) == 60)
        #expect(self.rules.decision(for: Messages.request(), stored: stored, at: Messages.at(59)) == .useStored(.fresh))
        #expect(self.rules.decision(for: Messages.request(), stored: stored, at: Messages.at(60)) == .validate)
    }

    @Test("s-maxage counts in a shared cache only")
    func sharedMaxAge() {
        let stored = Messages.stored(200, [("Cache-Control", "max-age=60, s-maxage=10")])
        #expect(stored.freshnessLifetime(isShared: false) == 60)
        #expect(stored.freshnessLifetime(isShared: true) == 10)
    }

    @Test("Expires minus Date, or minus the arrival without Date")
    func expires() {
        #expect(
            Messages.stored(200, [("Date", Messages.date(-100)), ("Expires", Messages.date(200))]).freshnessLifetime(
                isShared: false
            ) == 300
        )
        #expect(Messages.stored(200, [("Expires", Messages.date(200))]).freshnessLifetime(isShared: false) == 200)
    }

    @Test(
        "an invalid Expires, or two, means already expired",
        arguments: [
            [("Expires", "0")], [("Expires", "yesterday")],
            // Not HTTP-dates by RFC 9110's grammar, though close: a two-digit year, a dash.
            [("Expires", "Sun, 06 Nov 94 08:49:37 GMT")], [("Expires", "Fri, 15-Jan-2027 09:00:00 GMT")],
            [("Expires", Messages.date(60)), ("Expires", Messages.date(90))],
        ]
    )
    func invalidExpires(pairs: [(String, String)]) {
        let stored = Messages.stored(200, pairs + [("Last-Modified", Messages.date(-100_000))])
        #expect(stored.freshnessLifetime(isShared: false) == 0)
    }

    @Test("heuristic freshness: 10 % of the time since Last-Modified, for cacheable statuses only")
    func heuristic() {
        let lastModified = ("Last-Modified", Messages.date(-1_000))
        #expect(Messages.stored(200, [lastModified]).freshnessLifetime(isShared: false) == 100)
        #expect(Messages.stored(302, [lastModified]).freshnessLifetime(isShared: false) == 0)
        #expect(
            Messages.stored(302, [lastModified, ("Cache-Control", "public")]).freshnessLifetime(isShared: false) == 100
        )
        #expect(Messages.stored(200).freshnessLifetime(isShared: false) == 0)
        #expect(Messages.stored(200, [("Last-Modified", Messages.date(50))]).freshnessLifetime(isShared: false) == 0)
    }

    @Test("a malformed max-age makes the response stale, even beside a valid Expires")
    func malformedMaxAge() {
        let stored = Messages.stored(200, [("Cache-Control", "max-age=soon"), ("Expires", Messages.date(3600))])
        #expect(self.rules.decision(for: Messages.request(), stored: stored, at: Messages.at(0)) == .validate)
    }

    @Test("no-cache in the response means validate each time; must-revalidate means validate once stale")
    func noCacheAndMustRevalidate() {
        let noCache = Messages.stored(200, [("Cache-Control", "no-cache, max-age=60")])
        #expect(self.rules.decision(for: Messages.request(), stored: noCache, at: Messages.at(1)) == .validate)
        let mustRevalidate = Messages.stored(200, [("Cache-Control", "must-revalidate, max-age=60")])
        #expect(
            self.rules.decision(for: Messages.request(), stored: mustRevalidate, at: Messages.at(1))
                == .useStored(.fresh)
        )
        let request = Messages.request([("Cache-Control", "max-stale=1000")])
        #expect(self.rules.decision(for: request, stored: mustRevalidate, at: Messages.at(61)) == .validate)
    }
}
