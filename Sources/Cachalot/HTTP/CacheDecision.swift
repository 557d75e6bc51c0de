/// What to do with a request, given what is stored: the outcome of
/// ``CacheRules/decision(for:stored:at:policy:)``.
public enum CacheDecision: Sendable, Hashable {
    /// Answer with the stored response, without asking the origin.
    case useStored(Freshness)
    /// Answer with the stored, stale response now, and revalidate it in the background
    /// (RFC 5861 `stale-while-revalidate`).
    case useStoredAndRevalidate
    /// Ask the origin with the stored response's validators (see
    /// ``CacheRules/conditionalRequest(for:stored:)``), and use the stored response if the
    /// answer is 304.
    case validate
    /// Ask the origin; nothing stored may be used or validated.
    case fetch
    /// Answer 504 (Gateway Timeout) without asking the origin: the request said
    /// `only-if-cached`, or the policy is offline, and nothing stored may be used.
    case unavailable
}

/// Whether a stored response used as an answer was fresh, and if not, what allowed it.
public enum Freshness: Sendable, Hashable {
    /// The response was fresh: its age was within its freshness lifetime (and the request's
    /// `max-age` and `min-fresh`).
    case fresh
    /// The response was stale, and was used for the reason given.
    case stale(StaleReason)
}

/// Why a stale response was used as an answer.
public enum StaleReason: Sendable, Hashable {
    /// The request's `max-stale` accepted it.
    case maxStale
    /// Its `stale-while-revalidate` allowed it while it is revalidated in the background.
    case whileRevalidating
    /// The origin could not be reached or answered with a server error, and `stale-if-error`
    /// allowed it.
    case originError
    /// The origin could not be reached, and ``CacheRules/isStaleIfUnreachableEnabled`` allowed
    /// it (RFC 9111 §4.2.4) where `stale-if-error` did not.
    case unreachable
    /// The cache policy said to use stored data whatever its age
    /// (``CachePolicy/returnCacheDataElseLoad`` or ``CachePolicy/returnCacheDataDontLoad``).
    case policy
}
