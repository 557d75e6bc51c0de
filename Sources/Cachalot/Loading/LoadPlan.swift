import Foundation
import HTTPTypes

/// What a load does next, decided without I/O from the request, what is stored for it, the
/// rules, the policy and the time: the loader looks up, then carries out the step this
/// returns.
enum LoadPlan {
    /// What a load does next.
    enum Step {
        /// Answer with this: a stored response, or a 504 when only a stored one may answer.
        case answer(Resource)
        /// Answer with this stale stored response, and revalidate it in the background
        /// (`stale-while-revalidate`).
        case answerAndRevalidate(Resource, ResponseKey, CachedResponse)
        /// Ask the origin, validating the stored response if there is one, for `reason`.
        case exchange(ResponseKey, validating: CachedResponse?, reason: Resource.ForwardReason)
        /// Send a request whose answer is not stored.
        case uncached
        /// Only a stored response may answer, and memory and disk have none to use: the shared
        /// tiers are asked, else a 504 answers.
        case storedOnly(ResponseKey)

        /// The answer the step gives at once, if it gives one.
        var answer: Resource? {
            switch self {
            case .answer(let resource), .answerAndRevalidate(let resource, _, _): resource
            default: nil
            }
        }
    }

    /// The step for a `GET` of `key` given what is stored for it: `lookup`, `nil` if it was not
    /// read (a reload) or reading it failed.
    ///
    /// - Parameter hasSharedTiers: Whether tiers below the disk may hold what memory and disk
    ///   do not: then a request that only a stored response may answer asks them first.
    static func step(
        for request: HTTPRequest,
        key: ResponseKey,
        policy: CachePolicy,
        lookup: TierChain.Lookup?,
        rules: CacheRules,
        at now: Date,
        hasSharedTiers: Bool
    ) -> Step {
        var cached: (response: CachedResponse, tier: StorageTier)?
        if case .found(let response, let tier) = lookup { cached = (response, tier) }
        let decision = rules.decision(for: request, stored: cached?.response.stored, at: now, policy: policy)
        switch (decision, cached) {
        case (.useStored(.fresh), let cached?):
            let source: Resource.Source =
                switch cached.tier {
                case .memory: .memory
                case .disk: .disk
                case .shared: .shared
                }
            return .answer(self.answer(cached.response, source: source, at: now, rules: rules))
        case (.useStored(.stale(let reason)), let cached?):
            return .answer(self.answer(cached.response, source: .stale(reason), at: now, rules: rules))
        case (.useStoredAndRevalidate, let cached?):
            let stale = self.answer(cached.response, source: .stale(.whileRevalidating), at: now, rules: rules)
            return .answerAndRevalidate(stale, key, cached.response)
        case (.unavailable, _):
            return hasSharedTiers ? .storedOnly(key) : .answer(Self.unavailable)
        default:  // .validate or .fetch (the rules use a stored response only if there is one)
            let reason: Resource.ForwardReason
            switch lookup {
            case .found(let response, _)?:
                let stored = response.stored
                let isFresh = stored.freshnessLifetime(isShared: rules.isShared) > stored.age(at: now)
                reason = isFresh && !stored.cacheControl.isNoCache ? .request : .stale
            case .absent?: reason = .uriMiss
            case .otherVariants?: reason = .varyMiss
            case nil: reason = policy == .reloadIgnoringCacheData ? .bypass : .miss
            }
            return .exchange(key, validating: decision == .validate ? cached?.response : nil, reason: reason)
        }
    }

    /// The answer when only a stored response may answer and none can: 504 (Gateway Timeout),
    /// as RFC 9111 §5.2.1.7 has it for `only-if-cached`.
    static var unavailable: Resource {
        Resource(body: Data(), response: HTTPResponse(status: .gatewayTimeout), source: .generated)
    }

    /// A stored response as an answer at `now`, with its current `Age` and time to live.
    static func answer(_ cached: CachedResponse, source: Resource.Source, at now: Date, rules: CacheRules) -> Resource {
        let largest = TimeInterval(CacheControl.largestDeltaSeconds)
        let age = min(max(0, cached.stored.age(at: now)), largest)
        let lifetime = cached.stored.freshnessLifetime(isShared: rules.isShared)
        let timeToLive = min(max(-largest, lifetime - age), largest)
        return Resource(
            body: cached.body,
            stored: cached.stored,
            age: Int(age),
            timeToLive: Int(timeToLive),
            source: source
        )
    }
}
