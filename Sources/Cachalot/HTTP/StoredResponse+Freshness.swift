import Foundation
import HTTPTypes

extension StoredResponse {
    /// The directives that govern the stored response: those of `Cache-Control`, or of the
    /// targeted field that replaced it (see ``CacheRules/targetedFields``).
    public var cacheControl: CacheControl {
        self.facts.directives
    }

    /// The value of `Date`, or the time the response was received if it has none, several, or
    /// an invalid one (RFC 9110 §6.6.1).
    public var date: Date {
        self.facts.date
    }

    /// The response's current age in seconds at `now` (RFC 9111 §4.2.3): the age it had when it
    /// arrived, by `Age`, `Date` and the round trip, plus the time since. Of a list-valued `Age`
    /// (`Age: 5, 10`, or two field lines) the first member counts; if that is not a non-negative
    /// integer, `Age` is ignored (§5.1).
    public func age(at now: Date) -> TimeInterval {
        self.facts.correctedInitialAge + now.timeIntervalSince(self.responseTime)
    }

    /// How long the response stays fresh, in seconds (RFC 9111 §4.2.1): `s-maxage` in a shared
    /// cache, else `max-age`, else `Expires` minus `Date`, else a heuristic where allowed, else 0.
    /// A targeted field that governs the response (RFC 9213) gives `s-maxage` and `max-age`
    /// instead of `Cache-Control`, and `Expires` is then ignored.
    ///
    /// Invalid freshness information makes the response stale: a malformed or conflicting
    /// `max-age`, several `Expires` lines, or an `Expires` that is not a date (such as "0").
    public func freshnessLifetime(isShared: Bool) -> TimeInterval {
        isShared ? self.facts.sharedLifetime : self.facts.privateLifetime
    }

    /// Status codes whose responses a cache may store and reuse without explicit freshness
    /// (RFC 9110 §15.1).
    static let heuristicallyCacheableStatuses: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]
}

/// What a stored response's freshness depends on, computed once from its head.
///
/// The facts are kept with the head in a ``DiskCache`` entry's metadata, so that a disk hit
/// parses no header field. They are a pure function of the head and the two times, tagged with
/// ``version``: metadata whose facts another version computed has them computed again.
///
/// A class, so that handing the facts from the decoder to the stored response is one retain
/// rather than a copy of every directive.
final class FreshnessFacts: Sendable, Equatable {
    /// The version of the rules that compute the facts and of their binary form. Change it with
    /// either, so that facts stored before are not trusted.
    static let version: UInt16 = 2

    let directives: CacheControl
    /// The targeted cache-control fields, in order, whose directives replace `Cache-Control`
    /// and `Expires` if the response has one (RFC 9213): the rules' target list when the facts
    /// were computed, so that a 304 that freshens the response is read by it too.
    let targets: [HTTPField.Name]
    let date: Date
    /// `corrected_initial_age` (RFC 9111 §4.2.3).
    let correctedInitialAge: TimeInterval
    let privateLifetime: TimeInterval
    let sharedLifetime: TimeInterval
    /// The lowercased names `Vary` lists, or `nil` for `Vary: *`.
    let varyNames: [String]?

    init(
        directives: CacheControl,
        targets: [HTTPField.Name],
        date: Date,
        correctedInitialAge: TimeInterval,
        privateLifetime: TimeInterval,
        sharedLifetime: TimeInterval,
        varyNames: [String]?
    ) {
        self.directives = directives
        self.targets = targets
        self.date = date
        self.correctedInitialAge = correctedInitialAge
        self.privateLifetime = privateLifetime
        self.sharedLifetime = sharedLifetime
        self.varyNames = varyNames
    }

    init(_ response: HTTPResponse, _ requestTime: Date, _ responseTime: Date, targets: [HTTPField.Name]) {
        let fields = response.headerFields
        let directives: CacheControl
        let isTargeted: Bool
        if targets.isEmpty {
            // The usual case: no other field to look for.
            (directives, isTargeted) = (CacheControl(fields[values: .cacheControl]), false)
        } else {
            (directives, isTargeted) = CacheControl.governing(fields, targets: targets)
        }
        let dates = fields[values: .date]
        let date = dates.count == 1 ? HTTPDate.parse(dates[0], now: responseTime) ?? responseTime : responseTime
        let ageValue = Self.age(fields[values: .age]) ?? 0
        let apparentAge = max(0, responseTime.timeIntervalSince(date))
        let responseDelay = max(0, responseTime.timeIntervalSince(requestTime))
        self.directives = directives
        self.targets = targets
        self.date = date
        self.varyNames = StoredResponse.varyNames(of: fields)
        self.correctedInitialAge = max(apparentAge, TimeInterval(ageValue) + responseDelay)

        let explicitLifetime: TimeInterval?
        if let maxAge = directives.maxAge {
            explicitLifetime = TimeInterval(maxAge)
        } else if !isTargeted, !fields[values: .expires].isEmpty {
            let expires = fields[values: .expires]
            if expires.count == 1, let expiry = HTTPDate.parse(expires[0], now: responseTime) {
                explicitLifetime = max(0, expiry.timeIntervalSince(date))
            } else {
                explicitLifetime = 0
            }
        } else {
            explicitLifetime = nil
        }
        let privateLifetime = explicitLifetime ?? Self.heuristicLifetime(response, directives, date, responseTime)
        self.privateLifetime = privateLifetime
        self.sharedLifetime = directives.sharedMaxAge.map(TimeInterval.init) ?? privateLifetime
    }

    /// The value of `Age` (RFC 9111 §5.1): the first member of the field lines read as one list,
    /// the others discarded, or `nil` if there is none or it is not a non-negative integer (the
    /// field is then ignored, as if absent). A value too large to hold counts as 2³¹ seconds.
    static func age(_ values: [String]) -> Int? {
        for value in values {
            // Empty list elements do not count as members (RFC 9110 §5.6.1.2).
            for member in value.split(separator: ",", omittingEmptySubsequences: false) {
                let member = member.trimmingWhitespace()
                if !member.isEmpty { return CacheControl.deltaSeconds(member) }
            }
        }
        return nil
    }

    static func == (left: FreshnessFacts, right: FreshnessFacts) -> Bool {
        left.directives == right.directives && left.targets == right.targets && left.date == right.date
            && left.correctedInitialAge == right.correctedInitialAge && left.privateLifetime == right.privateLifetime
            && left.sharedLifetime == right.sharedLifetime && left.varyNames == right.varyNames
    }

    /// 10 % of the time between `Last-Modified` and `Date` (RFC 9111 §4.2.2), for a response
    /// without explicit expiration whose status is heuristically cacheable or that is `public`;
    /// otherwise 0.
    private static func heuristicLifetime(
        _ response: HTTPResponse,
        _ directives: CacheControl,
        _ date: Date,
        _ responseTime: Date
    ) -> TimeInterval {
        guard StoredResponse.heuristicallyCacheableStatuses.contains(response.status.code) || directives.isPublic
        else { return 0 }
        let values = response.headerFields[values: .lastModified]
        guard values.count == 1, let lastModified = HTTPDate.parse(values[0], now: responseTime) else { return 0 }
        return max(0, (date.timeIntervalSince(lastModified) / 10).rounded(.down))
    }
}
