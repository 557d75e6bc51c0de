import Foundation
import HTTPTypes

/// A client's `Range` request (RFC 9110 §14), answered from a whole representation: which bytes
/// to send in a 206 (Partial Content), or a 416 (Range Not Satisfiable), or the whole 200.
///
/// ```swift
/// switch ByteRanges.evaluate(request, response: response, length: body.count) {
/// case .whole: send(response, body)
/// case .partial(let ranges) where ranges.count == 1:
///     // 206 with Content-Range: ByteRanges.contentRange(ranges[0], length: body.count)
/// case .partial(let ranges): ...  // 206 multipart/byteranges
/// case .unsatisfiable: ...        // 416 with Content-Range: bytes */length
/// }
/// ```
///
/// Choices where the RFC leaves room (§14.2 lets a server ignore or coalesce ranges):
/// - More than 64 ranges are ignored: the whole representation is sent.
/// - Overlapping or adjacent ranges are coalesced into one, and the ranges are sent in
///   ascending order, whatever the order asked.
/// - A representation of 0 bytes is sent whole for a suffix range (the only kind it can
///   satisfy, with no byte), and is unsatisfiable for any other.
public enum ByteRanges {
    /// What to answer a request with.
    public enum Outcome: Sendable, Hashable {
        /// Send the whole representation (200): there is no range to honor, or it is ignored.
        case whole
        /// Send these ranges of the body (206), ascending, none overlapping or adjacent.
        case partial([Range<Int>])
        /// No range asked for overlaps the body: answer 416 (Range Not Satisfiable).
        case unsatisfiable
    }

    /// The most ranges one request may ask for before its `Range` is ignored.
    static let largestRangeCount = 64

    /// What to answer `request` with, given `response` (the selected representation, status 200)
    /// whose body is `length` bytes (nil if unknown). Honors If-Range.
    ///
    /// `Range` counts only in a `GET`, for a 200 of known length, in the `bytes` unit (any case),
    /// as `first-last`, `first-` or `-suffix` ranges separated by commas. A `Range` with a syntax
    /// error (a last position before the first, say) or of another unit is ignored. With
    /// `If-Range`, the ranges count only if its entity tag matches the response's `ETag` by
    /// strong comparison (a weak tag never does), or its date equals the response's valid
    /// `Last-Modified`.
    ///
    /// - Parameters:
    ///   - request: The request, with its `Range` and `If-Range`.
    ///   - response: The response that would be sent whole.
    ///   - length: The body's length in bytes, or `nil` if it is not known yet.
    /// - Returns: The whole body, the ranges to send (last positions held to the body), or
    ///   unsatisfiable.
    public static func evaluate(_ request: HTTPRequest, response: HTTPResponse, length: Int?) -> Outcome {
        guard request.method == .get, response.status.code == 200, let length, length >= 0 else { return .whole }
        let values = request.headerFields[values: .range]
        guard values.count == 1, Self.ifRangeHolds(request, response),
            let specs = Self.rangeSpecs(values[0]), specs.count <= Self.largestRangeCount
        else { return .whole }
        var ranges: [Range<Int>] = []
        var hasSuffix = false
        for spec in specs {
            switch spec {
            case .from(let first, let last):
                if first < length { ranges.append(first..<(min(last, length - 1) + 1)) }
            case .suffix(let count):
                hasSuffix = hasSuffix || count > 0
                if count > 0, length > 0 { ranges.append(max(0, length - count)..<length) }
            }
        }
        if length == 0, hasSuffix { return .whole }
        guard !ranges.isEmpty else { return .unsatisfiable }
        return .partial(Self.coalesced(ranges))
    }

    /// `bytes first-last/length`: the value of `Content-Range` for `range` of a body of
    /// `length` bytes (RFC 9110 §14.4).
    ///
    /// - Parameters:
    ///   - range: A non-empty range of the body.
    ///   - length: The length of the whole body.
    /// - Returns: For example `bytes 0-499/1234` for the first 500 bytes of 1,234.
    public static func contentRange(_ range: Range<Int>, length: Int) -> String {
        "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(length)"
    }

    /// One range as asked.
    private enum Spec {
        /// `first-last`, or `first-` with `last` as `Int.max`.
        case from(Int, last: Int)
        /// `-count`: the last `count` bytes.
        case suffix(Int)
    }

    /// The ranges a `Range` value asks for in the `bytes` unit, or `nil` if it has another unit
    /// or a syntax error (RFC 9110 §14.1.1).
    private static func rangeSpecs(_ value: String) -> [Spec]? {
        let value = value.trimmingWhitespace()
        guard let equals = value.firstIndex(of: "="), value[..<equals].lowercased() == "bytes" else { return nil }
        var specs: [Spec] = []
        for element in value[value.index(after: equals)...].split(separator: ",", omittingEmptySubsequences: false) {
            let element = element.trimmingWhitespace()
            // Empty list elements do not count (RFC 9110 §5.6.1.2).
            if element.isEmpty { continue }
            // A syntax error anywhere voids the whole field; so do too many ranges.
            guard specs.count < Self.largestRangeCount, let dash = element.firstIndex(of: "-") else { return nil }
            let firstText = element[..<dash]
            let lastText = element[element.index(after: dash)...]
            if firstText.isEmpty {
                guard let count = Self.number(lastText) else { return nil }
                specs.append(.suffix(count))
            } else {
                guard let first = Self.number(firstText) else { return nil }
                if lastText.isEmpty {
                    specs.append(.from(first, last: .max))
                } else {
                    guard let last = Self.number(lastText), last >= first else { return nil }
                    specs.append(.from(first, last: last))
                }
            }
        }
        return specs.isEmpty ? nil : specs
    }

    /// The digits `text`, at least one, as a number held to `Int.max`.
    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty else { return nil }
        var value = 0
        for byte in text.utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times10, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
            value = overflow || overflow2 ? .max : sum
        }
        return value
    }

    /// Whether the request's `If-Range` (if any) lets its ranges count (RFC 9110 §13.1.5).
    private static func ifRangeHolds(_ request: HTTPRequest, _ response: HTTPResponse) -> Bool {
        let values = request.headerFields[values: .ifRange]
        guard !values.isEmpty else { return true }
        guard values.count == 1 else { return false }
        let value = values[0].trimmingWhitespace()
        // An entity tag starts with a quote, or `W/` and a quote; anything else is a date.
        if value.hasPrefix("\"") || value.hasPrefix("W/") {
            let eTags = response.headerFields[values: .eTag]
            guard let tag = EntityTag(value), eTags.count == 1, let eTag = EntityTag(eTags[0]) else { return false }
            return tag.strongMatches(eTag)
        }
        let lastModified = response.headerFields[values: .lastModified]
        guard lastModified.count == 1, let modified = HTTPDate.parse(lastModified[0], now: Self.referenceTime),
            let date = HTTPDate.parse(value, now: Self.referenceTime)
        else { return false }
        return date == modified
    }

    /// The time against which two-digit years are read: both dates compared are read alike.
    private static let referenceTime = Date(timeIntervalSince1970: 1_800_000_000)

    /// `ranges` in ascending order, those that overlap or touch made one.
    private static func coalesced(_ ranges: [Range<Int>]) -> [Range<Int>] {
        let sorted = ranges.sorted { $0.lowerBound < $1.lowerBound }
        var result: [Range<Int>] = []
        result.reserveCapacity(sorted.count)
        for range in sorted {
            if let last = result.last, range.lowerBound <= last.upperBound {
                result[result.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                result.append(range)
            }
        }
        return result
    }
}
