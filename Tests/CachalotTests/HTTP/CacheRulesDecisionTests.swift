import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("CacheRules: request directives, stale content and policies")
struct CacheRulesDecisionTests {
    let rules = CacheRules.privateCache
    let fresh60 = Messages.stored(200, [("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")])

    func decide(
        _ pairs: [(String, String)],
        _ stored: StoredResponse?,
        at seconds: TimeInterval,
        policy: CachePolicy = .useProtocolCachePolicy
    ) -> CacheDecision {
        self.rules.decision(for: Messages.request(pairs), stored: stored, at: Messages.at(seconds), policy: policy)
    }

    @Test("nothing stored: fetch, or 504 for only-if-cached")
    func nothingStored() {
        #expect(self.decide([], nil, at: 0) == .fetch)
        #expect(self.decide([("Cache-Control", "only-if-cached")], nil, at: 0) == .unavailable)
    }

    @Test("request max-age: an older response is validated")
    func requestMaxAge() {
        #expect(self.decide([("Cache-Control", "max-age=10")], self.fresh60, at: 5) == .useStored(.fresh))
        #expect(self.decide([("Cache-Control", "max-age=10")], self.fresh60, at: 11) == .validate)
        #expect(self.decide([("Cache-Control", "max-age=0")], self.fresh60, at: 1) == .validate)
    }

    @Test("request min-fresh: a response fresh for less than that is validated")
    func minFresh() {
        #expect(self.decide([("Cache-Control", "min-fresh=30")], self.fresh60, at: 20) == .useStored(.fresh))
        #expect(self.decide([("Cache-Control", "min-fresh=30")], self.fresh60, at: 40) == .validate)
    }

    @Test("request max-stale: a stale response within it is used")
    func maxStale() {
        #expect(self.decide([("Cache-Control", "max-stale=30")], self.fresh60, at: 80) == .useStored(.stale(.maxStale)))
        #expect(self.decide([("Cache-Control", "max-stale=30")], self.fresh60, at: 100) == .validate)
        #expect(
            self.decide([("Cache-Control", "max-stale")], self.fresh60, at: 100_000) == .useStored(.stale(.maxStale))
        )
    }

    @Test("request no-cache, and Pragma: no-cache without Cache-Control, validate a fresh response")
    func requestNoCache() {
        #expect(self.decide([("Cache-Control", "no-cache")], self.fresh60, at: 1) == .validate)
        #expect(self.decide([("Pragma", "no-cache")], self.fresh60, at: 1) == .validate)
        #expect(
            self.decide([("Pragma", "no-cache"), ("Cache-Control", "max-stale=5")], self.fresh60, at: 1)
                == .useStored(.fresh)
        )
    }

    @Test("only-if-cached: a response that would need the origin is a 504")
    func onlyIfCached() {
        #expect(self.decide([("Cache-Control", "only-if-cached")], self.fresh60, at: 1) == .useStored(.fresh))
        #expect(self.decide([("Cache-Control", "only-if-cached")], self.fresh60, at: 61) == .unavailable)
    }

    @Test("stale-while-revalidate: within the window, answer stale and revalidate; after it, validate")
    func staleWhileRevalidate() {
        let stored = Messages.stored(200, [("Cache-Control", "max-age=60, stale-while-revalidate=30")])
        #expect(self.decide([], stored, at: 30) == .useStored(.fresh))
        #expect(self.decide([], stored, at: 75) == .useStoredAndRevalidate)
        #expect(self.decide([], stored, at: 95) == .validate)
        // The background revalidation is the cache's own request, not the client's.
        #expect(self.decide([("Cache-Control", "only-if-cached")], stored, at: 75) == .useStoredAndRevalidate)
        let forbidden = Messages.stored(
            200,
            [("Cache-Control", "max-age=60, stale-while-revalidate=30, must-revalidate")]
        )
        #expect(self.decide([], forbidden, at: 75) == .validate)
    }

    @Test("stale-if-error: within the window of the response or the request, unless stale is forbidden")
    func staleIfError() {
        let stored = Messages.stored(200, [("Cache-Control", "max-age=60, stale-if-error=100")])
        #expect(self.rules.mayUseStaleOnError(stored, for: Messages.request(), at: Messages.at(150)))
        #expect(!self.rules.mayUseStaleOnError(stored, for: Messages.request(), at: Messages.at(170)))
        let plain = Messages.stored(200, [("Cache-Control", "max-age=60")])
        #expect(!self.rules.mayUseStaleOnError(plain, for: Messages.request(), at: Messages.at(70)))
        let asking = Messages.request([("Cache-Control", "stale-if-error=20")])
        #expect(self.rules.mayUseStaleOnError(plain, for: asking, at: Messages.at(70)))
        let forbidden = Messages.stored(200, [("Cache-Control", "max-age=60, stale-if-error=100, must-revalidate")])
        #expect(!self.rules.mayUseStaleOnError(forbidden, for: Messages.request(), at: Messages.at(70)))
    }

    @Test("a shared cache never serves stale what proxy-revalidate or s-maxage governs")
    func sharedStale() {
        let stored = Messages.stored(200, [("Cache-Control", "s-maxage=60, stale-while-revalidate=30")])
        let request = Messages.request([("Cache-Control", "max-stale=100")])
        #expect(CacheRules.sharedCache.decision(for: request, stored: stored, at: Messages.at(70)) == .validate)
        #expect(CacheRules.privateCache.decision(for: request, stored: stored, at: Messages.at(70)) != .validate)
    }

    @Test("policies: cache else load, offline, reload, reload revalidating")
    func policies() {
        #expect(
            self.decide([], self.fresh60, at: 1_000, policy: .returnCacheDataElseLoad) == .useStored(.stale(.policy))
        )
        #expect(self.decide([], nil, at: 0, policy: .returnCacheDataElseLoad) == .fetch)
        #expect(
            self.decide([], self.fresh60, at: 1_000, policy: .returnCacheDataDontLoad) == .useStored(.stale(.policy))
        )
        #expect(self.decide([], nil, at: 0, policy: .returnCacheDataDontLoad) == .unavailable)
        #expect(self.decide([], self.fresh60, at: 1, policy: .reloadIgnoringCacheData) == .fetch)
        #expect(self.decide([], self.fresh60, at: 1, policy: .reloadRevalidatingCacheData) == .validate)
        let immutable = Messages.stored(200, [("Cache-Control", "max-age=60, immutable")])
        #expect(self.decide([], immutable, at: 1, policy: .reloadRevalidatingCacheData) == .useStored(.fresh))
        #expect(self.decide([], immutable, at: 61, policy: .reloadRevalidatingCacheData) == .validate)
    }

    @Test("Vary: a request with other values for the named fields does not match")
    func vary() {
        let request = Messages.request([("Accept-Language", "fr"), ("Accept", "image/*")])
        let stored = Messages.stored(
            200,
            [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
            request: request
        )
        #expect(self.rules.decision(for: request, stored: stored, at: Messages.at(1)) == .useStored(.fresh))
        let other = Messages.request([("Accept-Language", "de")])
        #expect(self.rules.decision(for: other, stored: stored, at: Messages.at(1)) == .fetch)
        // Whitespace differences do not count; the field absent is its own value.
        #expect(stored.matches(Messages.request([("accept-language", "  fr  ")])))
        #expect(!stored.matches(Messages.request()))
    }
}
