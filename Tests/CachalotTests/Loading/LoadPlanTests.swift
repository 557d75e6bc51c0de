import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

/// The step a load takes, decided from values alone: no cache, no socket, no clock but the one
/// passed in.
@Suite("LoadPlan")
struct LoadPlanTests {
    let key = ResponseKey(of: Messages.request())!

    func step(
        _ lookup: TierChain.Lookup?,
        request pairs: [(String, String)] = [],
        at seconds: TimeInterval = 0,
        policy: CachePolicy = .useProtocolCachePolicy,
        hasSharedTiers: Bool = false
    ) -> LoadPlan.Step {
        LoadPlan.step(
            for: Messages.request(pairs),
            key: self.key,
            policy: policy,
            lookup: lookup,
            rules: .sharedCache,
            at: Messages.at(seconds),
            hasSharedTiers: hasSharedTiers
        )
    }

    func found(_ pairs: [(String, String)], in tier: StorageTier = .memory) -> TierChain.Lookup {
        .found(CachedResponse(stored: Messages.stored(200, pairs), body: Data("body".utf8)), tier)
    }

    @Test("a fresh stored response answers, named by its tier, with its age and time to live")
    func fresh() throws {
        for (tier, source) in [(StorageTier.memory, Resource.Source.memory), (.disk, .disk), (.shared(0), .shared)] {
            let step = self.step(self.found([("Cache-Control", "max-age=60")], in: tier), at: 10)
            guard case .answer(let resource) = step else {
                Issue.record("\(step)")
                continue
            }
            #expect(resource.source == source)
            #expect(resource.body == Data("body".utf8))
            #expect(resource.response.headerFields[.age] == "10")
            #expect(resource.timeToLive == 50)
        }
    }

    @Test("within stale-while-revalidate: answer stale and revalidate the stored response")
    func staleWhileRevalidate() {
        let step = self.step(self.found([("Cache-Control", "max-age=1, stale-while-revalidate=60")]), at: 5)
        guard case .answerAndRevalidate(let resource, let key, _) = step else {
            Issue.record("\(step)")
            return
        }
        #expect(resource.source == .stale(.whileRevalidating))
        #expect(key == self.key)
    }

    @Test("a miss names why it goes to the origin: no entry, no variant, stale, the request, a reload")
    func forwardReasons() {
        func reason(_ step: LoadPlan.Step) -> (Resource.ForwardReason, Bool)? {
            guard case .exchange(_, let validating, let reason) = step else { return nil }
            return (reason, validating != nil)
        }
        #expect(reason(self.step(.absent))! == (.uriMiss, false))
        #expect(reason(self.step(.otherVariants))! == (.varyMiss, false))
        #expect(reason(self.step(nil))! == (.miss, false))
        #expect(reason(self.step(nil, policy: .reloadIgnoringCacheData))! == (.bypass, false))
        let stored = self.found([("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")])
        #expect(reason(self.step(stored, at: 61))! == (.stale, true))
        #expect(reason(self.step(stored, request: [("Cache-Control", "no-cache")], at: 1))! == (.request, true))
    }

    @Test("only-if-cached with nothing to use: the shared tiers are asked if there are any, else 504")
    func onlyIfCached() {
        let pairs = [("Cache-Control", "only-if-cached")]
        guard case .storedOnly(let key) = self.step(.absent, request: pairs, hasSharedTiers: true) else {
            Issue.record("not storedOnly")
            return
        }
        #expect(key == self.key)
        guard case .answer(let resource) = self.step(.absent, request: pairs, hasSharedTiers: false) else {
            Issue.record("not an answer")
            return
        }
        #expect(resource.statusCode == 504 && resource.source == .generated)
    }
}
