import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("CacheRules: stale answers when the origin cannot be reached (RFC 9111 §4.2.4)")
struct CacheRulesUnreachableTests {
    static let enabled = CacheRules(isStaleIfUnreachableEnabled: true)
    static let sharedEnabled = CacheRules(isShared: true, isStaleIfUnreachableEnabled: true)

    @Test("off by default: only stale-if-error allows a stale answer")
    func offByDefault() {
        #expect(!CacheRules.privateCache.isStaleIfUnreachableEnabled)
        #expect(!CacheRules.sharedCache.isStaleIfUnreachableEnabled)
        let stored = Messages.stored(200, [("Cache-Control", "max-age=10")])
        #expect(
            !CacheRules.privateCache.mayUseStaleWhenUnreachable(stored, for: Messages.request(), at: Messages.at(20))
        )
        let staleIfError = Messages.stored(200, [("Cache-Control", "max-age=10, stale-if-error=100")])
        let rules = CacheRules.privateCache
        #expect(rules.mayUseStaleWhenUnreachable(staleIfError, for: Messages.request(), at: Messages.at(20)))
        #expect(!rules.mayUseStaleWhenUnreachable(staleIfError, for: Messages.request(), at: Messages.at(200)))
    }

    @Test("enabled: a stale response of any age answers")
    func enabledAnyAge() {
        let stored = Messages.stored(200, [("Cache-Control", "max-age=10")])
        #expect(Self.enabled.mayUseStaleWhenUnreachable(stored, for: Messages.request(), at: Messages.at(20)))
        #expect(Self.enabled.mayUseStaleWhenUnreachable(stored, for: Messages.request(), at: Messages.at(1e7)))
        let heuristic = Messages.stored(200, [("Last-Modified", Messages.date(-100))])
        #expect(Self.sharedEnabled.mayUseStaleWhenUnreachable(heuristic, for: Messages.request(), at: Messages.at(1e5)))
        // A 5xx is not unreachable: mayUseStaleOnError decides it, unchanged.
        #expect(!Self.enabled.mayUseStaleOnError(stored, for: Messages.request(), at: Messages.at(20)))
    }

    @Test(
        "never where the response forbids stale answers, nor for a request with no-cache",
        arguments: [
            (false, [("Cache-Control", "max-age=10, must-revalidate")], []),
            (false, [("Cache-Control", "max-age=10, no-cache")], []),
            (true, [("Cache-Control", "max-age=10, proxy-revalidate")], []),
            (true, [("Cache-Control", "max-age=10, s-maxage=10")], []),
            (false, [("Cache-Control", "max-age=10")], [("Cache-Control", "no-cache")]),
            (false, [("Cache-Control", "max-age=10")], [("Pragma", "no-cache")]),
        ] as [(Bool, [(String, String)], [(String, String)])]
    )
    func forbidden(isShared: Bool, response: [(String, String)], request: [(String, String)]) {
        let rules = isShared ? Self.sharedEnabled : Self.enabled
        let stored = Messages.stored(200, response)
        #expect(!rules.mayUseStaleWhenUnreachable(stored, for: Messages.request(request), at: Messages.at(20)))
    }

    @Test("proxy-revalidate and s-maxage forbid it only in a shared cache")
    func privateCache() {
        let proxyRevalidate = Messages.stored(200, [("Cache-Control", "max-age=10, proxy-revalidate")])
        #expect(Self.enabled.mayUseStaleWhenUnreachable(proxyRevalidate, for: Messages.request(), at: Messages.at(20)))
        let sharedMaxAge = Messages.stored(200, [("Cache-Control", "max-age=10, s-maxage=10")])
        #expect(Self.enabled.mayUseStaleWhenUnreachable(sharedMaxAge, for: Messages.request(), at: Messages.at(20)))
    }
}
