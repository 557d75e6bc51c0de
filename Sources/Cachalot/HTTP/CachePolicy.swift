/// How a load uses the cache, per request or for a whole loader.
///
/// The names follow `URLRequest.CachePolicy`, whose users know them.
public enum CachePolicy: Sendable, Hashable {
    /// Follow HTTP's caching rules (RFC 9111 and RFC 5861): use a fresh stored response,
    /// validate a stale one, and store what may be stored. The default.
    case useProtocolCachePolicy
    /// Use any stored response, fresh or stale, without asking the origin; load only if
    /// nothing is stored.
    case returnCacheDataElseLoad
    /// Use any stored response, fresh or stale, and never load: offline use. Without a stored
    /// response the answer is 504 (Gateway Timeout).
    case returnCacheDataDontLoad
    /// Load from the origin, ignoring what is stored; the answer is stored as usual.
    case reloadIgnoringCacheData
    /// Validate the stored response with the origin before using it, even if it is fresh,
    /// except a fresh `immutable` one (RFC 8246); load if nothing is stored.
    case reloadRevalidatingCacheData
}
