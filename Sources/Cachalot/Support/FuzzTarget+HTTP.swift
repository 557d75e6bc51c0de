import Foundation
import HTTPTypes

extension FuzzTarget {
    // MARK: - Stored responses

    /// Reads `bytes` as a stored response's metadata (``StoredResponse/init(decoding:)``), and
    /// uses what decodes as the loader does: reads its head and freshness, decides on requests
    /// with each rule set and policy, makes a conditional request and freshens it with a 304.
    ///
    /// Invariants, for bytes that decode:
    /// - the status code known without decoding the head is the decoded head's;
    /// - its age at a fixed present and its freshness lifetimes are finite, and small enough
    ///   for the whole seconds that the loader and `cachalot list` make of them;
    /// - encoded and decoded again, it has the same head, varying fields and freshness facts
    ///   (the times are not compared: `Date` keeps them relative to 2001, which can round the
    ///   seconds since 1970 that the form stores).
    public static func storedResponse(_ bytes: UnsafeRawBufferPointer) {
        guard let stored = StoredResponse(decoding: Data(bytes)) else { return }
        let response = stored.response
        precondition(stored.statusCode == response.status.code, "the status code read early is not the head's")
        let age = stored.age(at: Self.now)
        for seconds in [age, stored.freshnessLifetime(isShared: false), stored.freshnessLifetime(isShared: true)] {
            precondition(seconds.isFinite && abs(seconds) < 1e15, "a decoded age or lifetime of \(seconds) s")
        }
        Self.use(stored)
        guard let again = StoredResponse(decoding: stored.encoded()) else {
            preconditionFailure("a decoded stored response, encoded again, does not decode")
        }
        precondition(again.response == response, "a stored response's head changed in a round trip")
        precondition(again.varyingFields == stored.varyingFields, "the varying fields changed in a round trip")
        precondition(again.facts.isSame(as: stored.facts), "the freshness facts changed in a round trip")
    }

    /// Does with `stored` what the loader and the rules do with a stored response.
    static func use(_ stored: StoredResponse) {
        _ = stored.age(at: Self.now)
        _ = stored.date
        _ = stored.cacheControl
        var varying = HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/")
        for field in stored.varyingFields {
            if let name = HTTPField.Name(field.name), let value = field.value {
                varying.headerFields.append(HTTPField(name: name, value: value))
            }
        }
        varying.headerFields[.cacheControl] = "max-stale=60, min-fresh=10, stale-if-error=30"
        let requests = [HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/"), varying]
        let policies: [CachePolicy] = [
            .useProtocolCachePolicy, .returnCacheDataElseLoad, .returnCacheDataDontLoad, .reloadIgnoringCacheData,
            .reloadRevalidatingCacheData,
        ]
        for rules in [CacheRules.privateCache, .sharedCache] {
            _ = stored.freshnessLifetime(isShared: rules.isShared)
            for request in requests {
                for policy in policies {
                    _ = rules.decision(for: request, stored: stored, at: Self.now, policy: policy)
                }
                _ = rules.mayUseStaleOnError(stored, for: request, at: Self.now)
                _ = rules.conditionalRequest(for: request, stored: stored)
                _ = rules.canStore(stored.response, for: request)
            }
            let notModified = HTTPResponse(status: .notModified, headerFields: [.cacheControl: "max-age=60"])
            if let freshened = rules.freshened(stored, with: notModified, requestTime: Self.now, responseTime: Self.now)
            {
                _ = rules.decision(for: requests[0], stored: freshened, at: Self.now)
            }
        }
    }

    // MARK: - Cache-Control

    /// Parses `bytes`, as text, as `Cache-Control` field lines, one a line (``CacheControl``),
    /// of a request and of a response that is then stored.
    ///
    /// Invariants:
    /// - every number is between 0 and 2³¹, but for `max-stale` without a value (`Int.max`);
    /// - the field names of `no-cache` and `private` are lowercase and not empty;
    /// - a stored response's directives are those of its lines, and its freshness lifetimes
    ///   and age are finite and not negative;
    /// - the directives come back unchanged from the metadata's binary form.
    public static func cacheControl(_ bytes: UnsafeRawBufferPointer) {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        let directives = CacheControl(lines.map(String.init))
        Self.checkBounds(directives)
        var request = HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/")
        var response = HTTPResponse(status: .ok)
        for line in lines {
            request.headerFields.append(HTTPField(name: .cacheControl, value: String(line)))
            response.headerFields.append(HTTPField(name: .cacheControl, value: String(line)))
        }
        let values = response.headerFields[values: .cacheControl]
        let parsed = CacheControl(values)
        Self.checkBounds(parsed)
        precondition(CacheRules.requestDirectives(request) == parsed, "a request's directives are not its lines'")
        let stored = StoredResponse(request: request, response: response, requestTime: Self.now, responseTime: Self.now)
        precondition(stored.cacheControl == parsed, "a stored response's directives are not its lines'")
        for isShared in [false, true] {
            let lifetime = stored.freshnessLifetime(isShared: isShared)
            precondition(lifetime.isFinite && lifetime >= 0, "a freshness lifetime of \(lifetime)")
        }
        let age = stored.age(at: Self.now)
        precondition(age.isFinite && age >= 0, "an age of \(age)")
        Self.use(stored)
        guard let decoded = StoredResponse(decoding: stored.encoded()) else {
            preconditionFailure("a stored response does not decode")
        }
        precondition(decoded.cacheControl == parsed, "directives changed in the metadata's binary form")
    }

    private static func checkBounds(_ directives: CacheControl) {
        let limit = CacheControl.largestDeltaSeconds
        for number in [
            directives.maxAge, directives.sharedMaxAge, directives.staleWhileRevalidate, directives.staleIfError,
            directives.minFresh,
        ] {
            if let number { precondition((0...limit).contains(number), "a directive's number \(number)") }
        }
        if let maxStale = directives.maxStale {
            precondition((0...limit).contains(maxStale) || maxStale == .max, "max-stale of \(maxStale)")
        }
        for name in directives.noCacheFields + directives.privateFields {
            precondition(!name.isEmpty && name == name.lowercased(), "a field name \"\(name)\"")
        }
    }

    // MARK: - Dates

    /// Parses `bytes`, as text, as an HTTP date (``HTTPDate/parse(_:now:)``) at a fixed
    /// present, and as the `Date`, `Expires` and `Last-Modified` of a response that is stored.
    ///
    /// Invariants:
    /// - a date is a whole second;
    /// - written as an IMF-fixdate (``HTTPDate/format(_:)``), it parses to the same instant,
    ///   whatever the present;
    /// - the stored response's freshness lifetimes and age are finite and not negative.
    public static func httpDate(_ bytes: UnsafeRawBufferPointer) {
        let text = String(decoding: bytes, as: UTF8.self)
        if let date = HTTPDate.parse(text, now: Self.now) {
            let seconds = date.timeIntervalSince1970
            precondition(seconds.rounded(.down) == seconds, "\(text) is not a whole second: \(seconds)")
            let formatted = HTTPDate.format(date)
            for now in [Self.now, Date(timeIntervalSince1970: 0)] {
                precondition(
                    HTTPDate.parse(formatted, now: now) == date,
                    "\(text) is written \(formatted), which reads as another date"
                )
            }
        }
        let line = text.split(separator: "\n", maxSplits: 1).first.map(String.init) ?? ""
        let response = HTTPResponse(
            status: .ok,
            headerFields: [.date: line, .expires: line, .lastModified: line, .eTag: "\"a\""]
        )
        let request = HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/")
        // Received an hour after the present, so that a date in the past or future both count.
        let stored = StoredResponse(
            request: request,
            response: response,
            requestTime: Self.now,
            responseTime: Self.now + 3_600
        )
        for isShared in [false, true] {
            let lifetime = stored.freshnessLifetime(isShared: isShared)
            precondition(lifetime.isFinite && lifetime >= 0, "a freshness lifetime of \(lifetime)")
        }
        let age = stored.age(at: Self.now + 3_600)
        precondition(age.isFinite && age >= 0, "an age of \(age)")
        Self.use(stored)
    }
}

extension FreshnessFacts {
    /// Whether both are the same facts, but for the date, which `Date` can round (see
    /// ``FuzzTarget/storedResponse(_:)``); numbers are compared bit for bit, so that NaN is
    /// itself.
    fileprivate func isSame(as other: FreshnessFacts) -> Bool {
        self.directives == other.directives && self.varyNames == other.varyNames
            && self.correctedInitialAge.bitPattern == other.correctedInitialAge.bitPattern
            && self.privateLifetime.bitPattern == other.privateLifetime.bitPattern
            && self.sharedLifetime.bitPattern == other.sharedLifetime.bitPattern
    }
}
