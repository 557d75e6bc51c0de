import Foundation
import HTTPTypes

/// A request's own preconditions (RFC 9110 §13), evaluated against the representation a cache
/// or a server is about to send: what a proxy answers a client's conditional request with.
///
/// ```swift
/// switch Preconditions.evaluate(request, against: response) {
/// case .proceed: send(response, body)
/// case .notModified: send(Preconditions.notModified(from: response))
/// case .preconditionFailed: send(HTTPResponse(status: .preconditionFailed))
/// }
/// ```
///
/// Choices where the RFC leaves room:
/// - A field whose value is not a list of entity tags (or `*`) matches no tag: an invalid
///   `If-Match` fails, an invalid `If-None-Match` lets the request proceed.
/// - Dates are compared to the second, as HTTP-dates have it. A two-digit year (RFC 850) is
///   read against the response's `Date`, so that the result depends on nothing but the two
///   messages.
public enum Preconditions {
    /// What to answer with.
    public enum Outcome: Sendable, Hashable {
        /// Every precondition holds, or none was evaluated: send the response.
        case proceed
        /// `If-None-Match` or `If-Modified-Since` found the client's copy current, for a `GET` or
        /// `HEAD`: send ``Preconditions/notModified(from:)`` (304).
        case notModified
        /// `If-Match` or `If-Unmodified-Since` failed, or `If-None-Match` matched for another
        /// method: send 412 (Precondition Failed).
        case preconditionFailed
    }

    /// Evaluates the request's If-Match, If-Unmodified-Since, If-None-Match and If-Modified-Since
    /// against `response` (the selected representation), in RFC 9110 §13.2.2's order.
    ///
    /// Nothing is evaluated unless `response` is a 2xx (§13.2.1). Then:
    /// 1. `If-Match`, by strong comparison with the response's `ETag` (`*` matches any):
    ///    no match fails.
    /// 2. Without `If-Match`, `If-Unmodified-Since` with a valid HTTP-date, if the response has
    ///    a valid `Last-Modified`: a later `Last-Modified` fails.
    /// 3. `If-None-Match`, by weak comparison (`*` matches any): a match is ``Outcome/notModified``
    ///    for `GET` and `HEAD`, and ``Outcome/preconditionFailed`` for other methods.
    /// 4. For `GET` and `HEAD` without `If-None-Match`, `If-Modified-Since` with a valid
    ///    HTTP-date, if the response has a valid `Last-Modified`: one no later is
    ///    ``Outcome/notModified``.
    ///
    /// - Parameters:
    ///   - request: The request, with its conditional fields.
    ///   - response: The response that would be sent: its status, `ETag` and `Last-Modified`.
    /// - Returns: Whether to send the response, a 304, or a 412.
    public static func evaluate(_ request: HTTPRequest, against response: HTTPResponse) -> Outcome {
        guard (200..<300).contains(response.status.code) else { return .proceed }
        let fields = request.headerFields
        // Most requests are not conditional.
        if fields[.ifMatch] == nil && fields[.ifUnmodifiedSince] == nil && fields[.ifNoneMatch] == nil
            && fields[.ifModifiedSince] == nil
        {
            return .proceed
        }
        let reference = Self.referenceTime(of: response)
        let eTags = response.headerFields[values: .eTag]
        let eTag = eTags.count == 1 ? EntityTag(eTags[0]) : nil
        let lastModified = Self.date(response.headerFields[values: .lastModified], now: reference)
        let isGetOrHead = request.method == .get || request.method == .head

        let ifMatch = fields[values: .ifMatch]
        if !ifMatch.isEmpty {
            if !Self.matches(ifMatch, eTag, by: { $0.strongMatches($1) }) { return .preconditionFailed }
        } else if let date = Self.date(fields[values: .ifUnmodifiedSince], now: reference), let lastModified,
            lastModified > date
        {
            return .preconditionFailed
        }

        let ifNoneMatch = fields[values: .ifNoneMatch]
        if !ifNoneMatch.isEmpty {
            if Self.matches(ifNoneMatch, eTag, by: { $0.weakMatches($1) }) {
                return isGetOrHead ? .notModified : .preconditionFailed
            }
        } else if isGetOrHead, let date = Self.date(fields[values: .ifModifiedSince], now: reference),
            let lastModified, lastModified <= date
        {
            return .notModified
        }
        return .proceed
    }

    /// The 304 to send instead of `response` (RFC 9110 §15.4.5): status 304, the fields a 304
    /// carries (Cache-Control, Content-Location, Date, ETag, Expires, Vary, and Last-Modified
    /// when there is no ETag), no body fields.
    ///
    /// `Age` is kept too: it is no metadata of the representation, and a cache that answers
    /// from storage sends it (RFC 9111 §5.1). The fields keep their order.
    ///
    /// - Parameter response: The response that the 304 replaces.
    /// - Returns: A 304 (Not Modified) with the fields of `response` listed above.
    public static func notModified(from response: HTTPResponse) -> HTTPResponse {
        var kept: Set<HTTPField.Name> = [.cacheControl, .contentLocation, .date, .eTag, .expires, .vary, .age]
        // Last-Modified guides a cache's update only where there is no ETag.
        if response.headerFields[.eTag] == nil { kept.insert(.lastModified) }
        let fields = response.headerFields.filter { kept.contains($0.name) }
        return HTTPResponse(status: .notModified, headerFields: HTTPFields(fields))
    }

    /// Whether the field lines `values` (`*` or a list of entity tags) match `eTag`.
    private static func matches(
        _ values: [String],
        _ eTag: EntityTag?,
        by comparison: (EntityTag, EntityTag) -> Bool
    ) -> Bool {
        // `*` matches any current representation, which `response` is.
        if values.count == 1, values[0].trimmingWhitespace() == "*" { return true }
        guard let eTag, let tags = EntityTag.list(values) else { return false }
        return tags.contains { comparison($0, eTag) }
    }

    /// The date of a field's lines, or `nil` unless there is one line and it is an HTTP-date
    /// (a list of dates is not one).
    private static func date(_ values: [String], now: Date) -> Date? {
        values.count == 1 ? HTTPDate.parse(values[0], now: now) : nil
    }

    /// The time against which a two-digit year is read: the response's `Date`, read itself
    /// against 2027 if it has one.
    private static func referenceTime(of response: HTTPResponse) -> Date {
        Self.date(response.headerFields[values: .date], now: Self.fallbackReference) ?? Self.fallbackReference
    }

    /// 2027-01-15: the time against which a response's `Date` with a two-digit year is read.
    private static let fallbackReference = Date(timeIntervalSince1970: 1_800_000_000)
}
