import Foundation
import HTTPTypes

extension CacheRules {
    // MARK: - Validation (§4.3)

    /// `request` made conditional on the stored response's validators: `If-None-Match` with its
    /// `ETag`, and `If-Modified-Since` with its `Last-Modified` (RFC 9111 §4.3.1). Validators the
    /// request carries already are kept. Without validators, the request is returned unchanged.
    public func conditionalRequest(for request: HTTPRequest, stored: StoredResponse) -> HTTPRequest {
        var request = request
        let fields = stored.response.headerFields
        if request.headerFields[.ifNoneMatch] == nil, let eTag = fields[.eTag] {
            request.headerFields[.ifNoneMatch] = eTag
        }
        let lastModified = fields[values: .lastModified]
        if request.headerFields[.ifModifiedSince] == nil, lastModified.count == 1,
            HTTPDate.parse(lastModified[0], now: stored.responseTime) != nil
        {
            request.headerFields[.ifModifiedSince] = lastModified[0]
        }
        return request
    }

    /// Whether `request` carries a validator (`If-None-Match` or `If-Modified-Since`), the only
    /// kind of request a 304 (Not Modified) answers (RFC 9110 §15.4.5).
    public static func isConditional(_ request: HTTPRequest) -> Bool {
        request.headerFields[.ifNoneMatch] != nil || request.headerFields[.ifModifiedSince] != nil
    }

    /// The stored response freshened by a 304 (Not Modified) `response` (RFC 9111 §4.3.4 and
    /// §3.2), or `nil` if the 304 does not select it: its strong or weak `ETag`, or else its
    /// `Last-Modified`, differs from the stored one's.
    ///
    /// Each field of the 304 replaces the stored lines of that name, except the hop-by-hop
    /// fields and `Content-Length`, which describe the 304 itself, and `Set-Cookie` unless
    /// ``storesResponsesWithSetCookie``. The request and response
    /// times become those of the validation.
    public func freshened(
        _ stored: StoredResponse,
        with response: HTTPResponse,
        requestTime: Date,
        responseTime: Date
    ) -> StoredResponse? {
        let old = stored.response.headerFields
        let new = StoredResponse.storableFields(of: response.headerFields)
        if let eTag = new[.eTag] {
            guard let storedETag = old[.eTag], Self.weakComparison(eTag, storedETag) else { return nil }
        } else if let lastModified = new[.lastModified] {
            guard old[.lastModified] == lastModified else { return nil }
        }
        var fields = old
        var replaced: Set<HTTPField.Name> = []
        for field in new
        where field.name != .contentLength && !replaced.contains(field.name)
            && (self.storesResponsesWithSetCookie || field.name != Self.setCookie)
        {
            fields[values: field.name] = new[values: field.name]
            replaced.insert(field.name)
        }
        var freshened = stored
        freshened.response.headerFields = fields
        freshened.requestTime = requestTime
        freshened.responseTime = responseTime
        return freshened
    }

    /// Whether two entity tags match when the weakness flag is ignored (RFC 9110 §8.8.3.2).
    static func weakComparison(_ left: String, _ right: String) -> Bool {
        func opaque(_ tag: String) -> Substring {
            let tag = Substring(tag.trimmingWhitespace())
            return tag.hasPrefix("W/") ? tag.dropFirst(2) : tag
        }
        return opaque(left) == opaque(right)
    }

    // MARK: - Invalidation (§4.4)

    /// The URLs whose stored responses a response to an unsafe request invalidates (RFC 9111
    /// §4.4): the target, and the `Location` and `Content-Location` on the same origin, as
    /// ``CacheKey`` writes them. None for a safe method or an error status.
    public func invalidatedURLs(by request: HTTPRequest, response: HTTPResponse) -> [String] {
        let safeMethods: Set<HTTPRequest.Method> = [.get, .head, .options, .trace]
        guard !safeMethods.contains(request.method), (200..<400).contains(response.status.code),
            let target = CacheKey.url(of: request)
        else { return [] }
        var urls = [target]
        guard let base = URL(string: target) else { return urls }
        for name in [HTTPField.Name.location, .contentLocation] {
            let values = response.headerFields[values: name]
            guard values.count == 1, let resolved = URL(string: values[0], relativeTo: base)?.absoluteURL,
                let url = CacheKey.url(of: resolved), CacheKey.origin(of: url) == CacheKey.origin(of: target),
                !urls.contains(url)
            else { continue }
            urls.append(url)
        }
        return urls
    }
}
