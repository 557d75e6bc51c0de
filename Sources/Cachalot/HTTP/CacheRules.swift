import Foundation
import HTTPTypes

/// HTTP's caching rules (RFC 9111, with RFC 5861's stale content extensions) as pure functions
/// of messages and a time: which responses may be stored, when a stored one may be used, how
/// to validate it and merge a 304, and what an unsafe request invalidates.
///
/// ```swift
/// let rules = CacheRules.privateCache
/// switch rules.decision(for: request, stored: stored, at: now) {
/// case .useStored: answer(from: stored)
/// case .validate: send(rules.conditionalRequest(for: request, stored: stored!))
/// ...
/// }
/// ```
///
/// A private cache (the default, for apps and the command line) and a shared cache (for a
/// proxy) differ where RFC 9111 says they do: a shared cache obeys `s-maxage` and
/// `proxy-revalidate`, stores no `private` response, and stores a response to a request with
/// `Authorization` only if the response allows it explicitly.
///
/// Choices where the RFCs leave room (see also ``CacheControl``):
/// - A qualified `no-cache="field"` is obeyed as an unqualified `no-cache`, as most caches do
///   (§5.2.2.4); a qualified `private="field"` as an unqualified `private` in a shared cache.
/// - No stale response is ever served where `must-revalidate`, `no-cache` (or in a shared cache
///   `proxy-revalidate` or `s-maxage`) forbids it (§4.2.4), not even by `stale-if-error`.
/// - Only `GET` responses are stored, and `206` (partial content) is not, since the cache does
///   not combine ranges.
/// - A shared cache stores no response with `Set-Cookie` unless
///   ``storesResponsesWithSetCookie`` says so (see there).
public struct CacheRules: Sendable, Hashable {
    /// Whether the cache is shared between users (a proxy) rather than private to one. Default:
    /// `false`.
    public var isShared: Bool

    /// The targeted cache-control fields this cache obeys, most applicable first: its target
    /// list (RFC 9213). Default: none (only `Cache-Control` counts).
    ///
    /// When a response carries one of these fields with a valid, non-empty value (a Structured
    /// Fields Dictionary; any other value counts as absent), the first in list order replaces
    /// both `Cache-Control` and `Expires` in this cache's decisions to store the response and
    /// for how long it is fresh, and what it allows stale. The response as relayed keeps all
    /// its fields. A proxy typically lists its own field before `CDN-Cache-Control`:
    ///
    /// ```swift
    /// var rules = CacheRules.sharedCache
    /// rules.targetedFields = [HTTPField.Name("Cachalot-Cache-Control")!, HTTPField.Name("CDN-Cache-Control")!]
    /// ```
    ///
    /// A stored response keeps the list it was stored with (see
    /// ``StoredResponse/init(request:response:requestTime:responseTime:targetedFields:)``):
    /// changing the list changes how responses stored after are read, not those stored before.
    public var targetedFields: [HTTPField.Name]

    /// Whether a stale stored response may answer when the origin cannot be reached at all (a
    /// transport failure, not a 5xx status), as RFC 9111 §4.2.4 allows a disconnected cache to.
    /// Default: `false` (only `stale-if-error` allows it).
    ///
    /// Never where the response forbids serving it stale (`must-revalidate`, `no-cache`, or in
    /// a shared cache `proxy-revalidate` or `s-maxage`), nor for a request with `no-cache`.
    /// See ``mayUseStaleWhenUnreachable(_:for:at:)``.
    public var isStaleIfUnreachableEnabled: Bool

    /// Whether a response with `Set-Cookie` may be stored. Default: `true` for a private cache,
    /// `false` for a shared one.
    ///
    /// RFC 9111 lets a cache store it (§7.3 of RFC 9111 and RFC 6265 §8.5 leave it to the
    /// origin to say `no-store` or `private`), but an origin that forgets to, on a login page
    /// say, would have a shared cache hand one user's session to every user; nginx and Varnish
    /// do not store such responses by default either. The client that asked still gets the
    /// response with its cookie; the next request goes to the origin. Without it, a 304 that
    /// carries `Set-Cookie` does not add it to the stored response either.
    public var storesResponsesWithSetCookie: Bool

    /// Rules for a cache private to one user: apps and the command line.
    public static let privateCache = CacheRules(isShared: false)
    /// Rules for a cache shared between users: a proxy.
    public static let sharedCache = CacheRules(isShared: true)

    /// Creates rules for a private or a shared cache.
    ///
    /// - Parameters:
    ///   - isShared: Whether the cache is shared between users. Default: `false`.
    ///   - targetedFields: The targeted cache-control fields the cache obeys, most applicable
    ///     first (see ``targetedFields``). Default: none.
    ///   - isStaleIfUnreachableEnabled: Whether a stale response may answer when the origin
    ///     cannot be reached (see ``isStaleIfUnreachableEnabled``). Default: `false`.
    ///   - storesResponsesWithSetCookie: Whether a response with `Set-Cookie` may be stored (see
    ///     ``storesResponsesWithSetCookie``). Default: `nil`, which means `true` for a private
    ///     cache and `false` for a shared one.
    public init(
        isShared: Bool = false,
        targetedFields: [HTTPField.Name] = [],
        isStaleIfUnreachableEnabled: Bool = false,
        storesResponsesWithSetCookie: Bool? = nil
    ) {
        self.isShared = isShared
        self.targetedFields = targetedFields
        self.isStaleIfUnreachableEnabled = isStaleIfUnreachableEnabled
        self.storesResponsesWithSetCookie = storesResponsesWithSetCookie ?? !isShared
    }

    // MARK: - Storing (§3)

    /// Whether `response`, the answer to `request`, may be stored (RFC 9111 §3).
    ///
    /// Whether its body is whole and small enough is for the caller to check.
    public func canStore(_ response: HTTPResponse, for request: HTTPRequest) -> Bool {
        // A 304 is merged into the response it validates (§4.3.4), never stored as one.
        guard request.method == .get, response.status.code >= 200, response.status.code != 206,
            response.status.code != 304
        else { return false }
        let requestDirectives = Self.requestDirectives(request)
        let (directives, isTargeted) = CacheControl.governing(response.headerFields, targets: self.targetedFields)
        // must-understand lets a cache that understands the status code ignore no-store.
        let understandsStatus = Self.understoodStatuses.contains(response.status.code)
        if directives.mustUnderstand && !understandsStatus { return false }
        if directives.isNoStore && !(directives.mustUnderstand && understandsStatus) { return false }
        if requestDirectives.isNoStore { return false }
        if self.isShared && directives.isPrivate { return false }
        if !self.storesResponsesWithSetCookie && response.headerFields[Self.setCookie] != nil { return false }
        if self.isShared && request.headerFields[.authorization] != nil
            && !(directives.mustRevalidate || directives.isPublic || directives.sharedMaxAge != nil)
        {
            return false
        }
        guard StoredResponse.varyNames(of: response.headerFields) != nil else { return false }  // Vary: *
        return directives.isPublic || (!self.isShared && directives.isPrivate)
            || (!isTargeted && !response.headerFields[values: .expires].isEmpty) || directives.maxAge != nil
            || (self.isShared && directives.sharedMaxAge != nil)
            || StoredResponse.heuristicallyCacheableStatuses.contains(response.status.code)
    }

    /// Final status codes whose caching rules this cache knows, for `must-understand`.
    static let understoodStatuses: Set<Int> = [
        200, 203, 204, 300, 301, 302, 303, 304, 307, 308, 404, 405, 410, 414, 501,
    ]

    // MARK: - Using a stored response (§4)

    /// What to do with `request` given the response stored for its URL (or `nil`), at `now`.
    ///
    /// - Parameters:
    ///   - request: The request, whose `Cache-Control` (or, without one, `Pragma: no-cache`)
    ///     and `Vary`-named fields count.
    ///   - stored: The stored response for the request's URL, if any.
    ///   - now: The present.
    ///   - policy: How this load uses the cache. Default: the protocol's rules.
    public func decision(
        for request: HTTPRequest,
        stored: StoredResponse?,
        at now: Date,
        policy: CachePolicy = .useProtocolCachePolicy
    ) -> CacheDecision {
        let requestDirectives = Self.requestDirectives(request)
        let onlyIfCached = requestDirectives.isOnlyIfCached || policy == .returnCacheDataDontLoad
        guard let stored, stored.matches(request), policy != .reloadIgnoringCacheData else {
            return onlyIfCached ? .unavailable : .fetch
        }
        let age = stored.age(at: now)
        let lifetime = stored.freshnessLifetime(isShared: self.isShared)
        let isFresh = lifetime > age
        // Read in place: a copy of the directives would cost a retain and release of each list.
        let facts = stored.facts
        switch policy {
        case .returnCacheDataElseLoad, .returnCacheDataDontLoad:
            return .useStored(isFresh ? .fresh : .stale(.policy))
        case .reloadRevalidatingCacheData:
            return isFresh && facts.directives.isImmutable ? .useStored(.fresh) : .validate
        case .reloadIgnoringCacheData:
            return .fetch
        case .useProtocolCachePolicy:
            break
        }
        let decision: CacheDecision
        if requestDirectives.isNoCache || facts.directives.isNoCache {
            decision = .validate
        } else if let maxAge = requestDirectives.maxAge, age > TimeInterval(maxAge) {
            decision = .validate
        } else if isFresh {
            let minFresh = TimeInterval(requestDirectives.minFresh ?? 0)
            decision = lifetime - age >= minFresh ? .useStored(.fresh) : .validate
        } else if self.forbidsStale(facts.directives) {
            decision = .validate
        } else if let maxStale = requestDirectives.maxStale, age - lifetime <= TimeInterval(maxStale) {
            decision = .useStored(.stale(.maxStale))
        } else if let window = facts.directives.staleWhileRevalidate, age - lifetime <= TimeInterval(window) {
            decision = .useStoredAndRevalidate
        } else {
            decision = .validate
        }
        return onlyIfCached && decision == .validate ? .unavailable : decision
    }

    /// Whether the stale `stored` response may answer `request` at `now` because the origin
    /// failed or answered with a server error (RFC 5861 `stale-if-error`, from the response or
    /// the request, whichever allows longer).
    public func mayUseStaleOnError(_ stored: StoredResponse, for request: HTTPRequest, at now: Date) -> Bool {
        let directives = stored.cacheControl
        guard !self.forbidsStale(directives), !directives.isNoCache else { return false }
        let window = max(directives.staleIfError ?? -1, Self.requestDirectives(request).staleIfError ?? -1)
        guard window >= 0 else { return false }
        return stored.age(at: now) - stored.freshnessLifetime(isShared: self.isShared) <= TimeInterval(window)
    }

    /// Whether the stale `stored` response may answer `request` at `now` because the origin could
    /// not be reached: if ``mayUseStaleOnError(_:for:at:)`` allows it, or, with
    /// ``isStaleIfUnreachableEnabled``, whatever its age, unless the response forbids serving
    /// it stale (§4.2.4) or the request has `no-cache` (or `Pragma: no-cache`).
    public func mayUseStaleWhenUnreachable(_ stored: StoredResponse, for request: HTTPRequest, at now: Date) -> Bool {
        if self.mayUseStaleOnError(stored, for: request, at: now) { return true }
        guard self.isStaleIfUnreachableEnabled else { return false }
        let directives = stored.cacheControl
        return !self.forbidsStale(directives) && !directives.isNoCache && !Self.requestDirectives(request).isNoCache
    }

    /// Whether the response's directives forbid serving it stale (§4.2.4).
    private func forbidsStale(_ directives: CacheControl) -> Bool {
        directives.mustRevalidate || (self.isShared && (directives.proxyRevalidate || directives.sharedMaxAge != nil))
    }

    /// The request's directives; without `Cache-Control`, `Pragma: no-cache` counts as
    /// `no-cache` (RFC 9111 §5.4).
    static func requestDirectives(_ request: HTTPRequest) -> CacheControl {
        // Most requests carry neither field: nothing to parse.
        guard !request.headerFields.isEmpty else { return CacheControl() }
        let values = request.headerFields[values: .cacheControl]
        var directives = CacheControl(values)
        if values.isEmpty,
            request.headerFields[values: Self.pragma].contains(where: {
                CacheControl.directives(in: $0).contains { $0.name == "no-cache" }
            })
        {
            directives.isNoCache = true
        }
        return directives
    }

    // "Pragma" is a valid field name, so the initializer cannot fail.
    private static let pragma = HTTPField.Name("Pragma")!
    // "Set-Cookie" too.
    static let setCookie = HTTPField.Name("Set-Cookie")!
}
