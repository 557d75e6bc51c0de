/// The directives of `Cache-Control` field lines (RFC 9111 §5.2 and RFC 5861), of a request or
/// of a response.
///
/// ```swift
/// let directives = CacheControl(response.headerFields[values: .cacheControl])
/// if directives.isNoStore { return }
/// ```
///
/// Parsing follows the RFC's grammar: directive names in any case, arguments as tokens or quoted
/// strings (commas inside quotes do not split), several field lines read as one list, unknown
/// directives ignored. Where a value is malformed or given twice, the reading is the more
/// restrictive one, as RFC 9111 §4.2.1 advises:
///
/// - `max-age` or `s-maxage` that is not a number, or given twice with different values,
///   counts as 0 (the response is stale at once) and sets ``hasInvalidFreshness``.
/// - `stale-while-revalidate`, `stale-if-error` and `max-stale` take their smallest valid value
///   and `min-fresh` its largest; a malformed one is ignored.
/// - A number too large to hold counts as 2³¹ seconds (§1.2.2).
/// - `private` wins over `public`.
///
/// A stored response keeps its parsed directives in its metadata (see
/// ``StoredResponse/encoded()``): a new directive goes into that form too, with the version of
/// the freshness facts changed, so that directives stored without it are parsed again.
public struct CacheControl: Sendable, Hashable {
    /// `max-age`: how many seconds the response stays fresh, or, in a request, the oldest
    /// response the client accepts. `nil` when absent; 0 when malformed or given twice with
    /// different values (see ``hasInvalidFreshness``).
    public var maxAge: Int?
    /// `s-maxage`: the freshness lifetime in shared caches, before `max-age`. `nil` when absent;
    /// 0 when malformed or given twice with different values.
    public var sharedMaxAge: Int?
    /// `no-cache`: a stored response must be validated before each use.
    public var isNoCache = false
    /// The field names listed by a qualified `no-cache="…"`, lowercased.
    public var noCacheFields: [String] = []
    /// `no-store`: the message must not be stored.
    public var isNoStore = false
    /// `private`: only a private cache may store the response.
    public var isPrivate = false
    /// The field names listed by a qualified `private="…"`, lowercased.
    public var privateFields: [String] = []
    /// `public`: any cache may store the response, even one otherwise not storable.
    public var isPublic = false
    /// `must-revalidate`: once stale, the response must not be used without validation.
    public var mustRevalidate = false
    /// `proxy-revalidate`: `must-revalidate` for shared caches only.
    public var proxyRevalidate = false
    /// `must-understand`: store only if the status code's caching rules are understood.
    public var mustUnderstand = false
    /// `no-transform`.
    public var noTransform = false
    /// `immutable` (RFC 8246): while fresh, the response is not revalidated on a reload.
    public var isImmutable = false
    /// `stale-while-revalidate` (RFC 5861): seconds after it turns stale during which the
    /// response may be served while it is revalidated in the background. `nil` when absent or
    /// malformed.
    public var staleWhileRevalidate: Int?
    /// `stale-if-error` (RFC 5861): seconds after it turns stale during which the response may
    /// be served if the origin fails or answers with a server error. `nil` when absent or
    /// malformed.
    public var staleIfError: Int?
    /// `max-stale` (request): how stale a response the client accepts; `Int.max` when the
    /// directive has no value (any staleness); `nil` when absent or malformed.
    public var maxStale: Int?
    /// `min-fresh` (request): how long the response must still stay fresh; `nil` when absent or
    /// malformed.
    public var minFresh: Int?
    /// `only-if-cached` (request): answer from the cache or with 504, never from the network.
    public var isOnlyIfCached = false
    /// Whether `max-age` or `s-maxage` was malformed or given twice with different values, so
    /// that the response is treated as stale.
    public var hasInvalidFreshness = false

    /// The largest number of seconds a directive holds (RFC 9111 §1.2.2).
    public static let largestDeltaSeconds = 1 << 31

    /// No directives.
    public init() {}

    /// Reads the directives of the field lines `values`, in order.
    public init(_ values: [String]) {
        for value in values {
            for (name, argument) in Self.directives(in: value) {
                self.apply(name, argument)
            }
        }
    }

    /// Reads the directives of one field value.
    public init(_ value: String) {
        self.init([value])
    }

    /// Reads directives already split into lowercased names and arguments, in order.
    init(directives: [(name: String, argument: String?)]) {
        for (name, argument) in directives {
            self.apply(name, argument)
        }
    }

    private mutating func apply(_ name: String, _ argument: String?) {
        switch name {
        case "max-age": self.maxAge = self.freshness(self.maxAge, argument)
        case "s-maxage": self.sharedMaxAge = self.freshness(self.sharedMaxAge, argument)
        case "no-cache":
            self.isNoCache = true
            self.noCacheFields += Self.fieldNames(argument)
        case "no-store": self.isNoStore = true
        case "private":
            self.isPrivate = true
            self.privateFields += Self.fieldNames(argument)
        case "public": self.isPublic = true
        case "must-revalidate": self.mustRevalidate = true
        case "proxy-revalidate": self.proxyRevalidate = true
        case "must-understand": self.mustUnderstand = true
        case "no-transform": self.noTransform = true
        case "immutable": self.isImmutable = true
        case "only-if-cached": self.isOnlyIfCached = true
        case "stale-while-revalidate": self.staleWhileRevalidate = Self.smaller(self.staleWhileRevalidate, argument)
        case "stale-if-error": self.staleIfError = Self.smaller(self.staleIfError, argument)
        case "max-stale":
            if argument == nil {
                self.maxStale = self.maxStale ?? Int.max
            } else {
                self.maxStale = Self.smaller(self.maxStale, argument)
            }
        case "min-fresh":
            if let seconds = Self.deltaSeconds(argument) { self.minFresh = max(self.minFresh ?? 0, seconds) }
        default: break  // Unknown directives are ignored (§5.2.3).
        }
    }

    /// A `max-age` or `s-maxage` value: malformed or conflicting means stale.
    private mutating func freshness(_ current: Int?, _ argument: String?) -> Int {
        guard let seconds = Self.deltaSeconds(argument), current == nil || current == seconds else {
            self.hasInvalidFreshness = true
            return 0
        }
        return seconds
    }

    private static func smaller(_ current: Int?, _ argument: String?) -> Int? {
        guard let seconds = Self.deltaSeconds(argument) else { return current }
        return min(current ?? .max, seconds)
    }

    /// A delta-seconds argument (digits only), clamped to 2³¹; `nil` if missing or malformed.
    static func deltaSeconds(_ argument: String?) -> Int? {
        guard let argument, !argument.isEmpty else { return nil }
        var value = 0
        for byte in argument.utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = min(value * 10 + Int(byte - UInt8(ascii: "0")), Self.largestDeltaSeconds)
        }
        return value
    }

    private static func fieldNames(_ argument: String?) -> [String] {
        guard let argument else { return [] }
        return argument.split(separator: ",").map { $0.trimmingWhitespace().lowercased() }.filter { !$0.isEmpty }
    }

    /// The directives of one field value: lowercased names, with arguments unquoted.
    static func directives(in value: String) -> [(name: String, argument: String?)] {
        var result: [(name: String, argument: String?)] = []
        var scanner = FieldScanner(value)
        while !scanner.isAtEnd {
            scanner.skip { $0 == UInt8(ascii: ",") || FieldScanner.isWhitespace($0) }
            let name = scanner.take {
                $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: ",") && !FieldScanner.isWhitespace($0)
            }
            scanner.skip(while: FieldScanner.isWhitespace)
            var argument: String?
            if scanner.peek == UInt8(ascii: "=") {
                scanner.advance()
                scanner.skip(while: FieldScanner.isWhitespace)
                if scanner.peek == UInt8(ascii: "\"") {
                    argument = scanner.takeQuotedString()
                    // Anything between the closing quote and the next comma is ignored.
                    _ = scanner.take { $0 != UInt8(ascii: ",") }
                } else {
                    argument = scanner.take { $0 != UInt8(ascii: ",") }.trimmingWhitespace()
                }
            } else {
                _ = scanner.take { $0 != UInt8(ascii: ",") }
            }
            if !name.isEmpty { result.append((name.lowercased(), argument)) }
        }
        return result
    }
}

/// Reads a field value byte by byte: tokens, quoted strings and lists (RFC 9110 §5.6).
struct FieldScanner {
    private let bytes: [UInt8]
    private var position = 0

    init(_ value: String) {
        self.bytes = Array(value.utf8)
    }

    var isAtEnd: Bool { self.position >= self.bytes.count }
    var peek: UInt8? { self.isAtEnd ? nil : self.bytes[self.position] }

    mutating func advance() { self.position += 1 }

    mutating func skip(while isSkipped: (UInt8) -> Bool) {
        while let byte = self.peek, isSkipped(byte) { self.position += 1 }
    }

    /// The bytes up to the first for which `isIncluded` fails, as a string.
    mutating func take(while isIncluded: (UInt8) -> Bool) -> String {
        let start = self.position
        self.skip(while: isIncluded)
        return String(decoding: self.bytes[start..<self.position], as: UTF8.self)
    }

    /// A quoted string starting at the current `"`, without its quotes and with `\` escapes
    /// resolved. An unterminated one runs to the end and keeps its opening quote, so that it
    /// reads as no valid value.
    mutating func takeQuotedString() -> String {
        self.advance()
        var result: [UInt8] = []
        var isTerminated = false
        while let byte = self.peek {
            self.advance()
            if byte == UInt8(ascii: "\"") {
                isTerminated = true
                break
            }
            if byte == UInt8(ascii: "\\"), let escaped = self.peek {
                self.advance()
                result.append(escaped)
            } else {
                result.append(byte)
            }
        }
        if !isTerminated { result.insert(UInt8(ascii: "\""), at: 0) }
        return String(decoding: result, as: UTF8.self)
    }

    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace, bytes of a
    /// field value: read as bytes, not as characters, which would cost the grapheme breaking).
    func trimmingWhitespace() -> String {
        let utf8 = self.utf8
        var start: Self.UTF8View.Index?
        var end = utf8.startIndex
        var index = utf8.startIndex
        while index != utf8.endIndex {
            let next = utf8.index(after: index)
            if !FieldScanner.isWhitespace(utf8[index]) {
                if start == nil { start = index }
                end = next
            }
            index = next
        }
        guard let start else { return "" }
        return String(decoding: utf8[start..<end], as: UTF8.self)
    }
}
