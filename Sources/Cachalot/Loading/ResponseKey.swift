import HTTPTypes

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A key of the loader's memory tier: a key string (see ``CacheKey``) held as parts that spell
/// it, the scheme with `://`, the authority and the rest.
///
/// A request's key is made of the request's own strings: joining them into one new string
/// costs more than the memory tier's lookup itself. A key hashes and compares as the bytes it
/// spells, however they are split, so a key made from a request equals one made from the same
/// key string (an invalidated URL, say).
struct ResponseKey: Hashable, Sendable {
    private let scheme: Scheme
    private let authority: String
    /// The path and query, and, for a variant, the fields that select it; or a whole key.
    private let rest: String

    /// The scheme's part of the key: static bytes, which cost no retain to copy, hash or compare.
    private enum Scheme: UInt8 {
        /// The key is all in `rest`.
        case none
        case http
        case https

        var prefix: StaticString {
            switch self {
            case .none: ""
            case .http: "http://"
            case .https: "https://"
            }
        }
    }

    private init(scheme: Scheme, authority: String, rest: String) {
        self.scheme = scheme
        self.authority = authority
        self.rest = rest
    }

    /// The key `string`.
    init(_ string: String) {
        self.init(scheme: .none, authority: "", rest: string)
    }

    /// The key of `request`'s URL, with the key transform `transform` if any; `nil` unless the
    /// request has an `http` or `https` URL with an authority.
    init?(of request: HTTPRequest, transform: (@Sendable (String) -> String)? = nil) {
        guard let scheme = request.scheme else { return nil }
        if transform == nil, let authority = CacheKey.authority(of: request), let path = request.path,
            CacheKey.isKeyForm(scheme: scheme, authority: authority, path: path)
        {
            self.init(scheme: scheme == "https" ? .https : .http, authority: authority, rest: path)
            return
        }
        // Any other spelling (`HTTPS`, a capital in the host, a default port) is normalized.
        guard let url = CacheKey.url(of: request), url.hasPrefix("https://") || url.hasPrefix("http://") else {
            return nil
        }
        self.init(transform?(url) ?? url)
    }

    /// The key as one string, for the disk tier and for messages.
    var string: String {
        CacheKey.joined(self.scheme.prefix.description, self.authority, self.rest)
    }

    /// The key of the variant that `request` selects among the responses under this key, which
    /// vary on the lowercased field `names` (see ``CacheKey/variant(of:names:request:)``).
    func variant(names: [String], request: HTTPRequest) -> ResponseKey {
        ResponseKey(
            scheme: self.scheme,
            authority: self.authority,
            rest: self.rest + CacheKey.variantSuffix(names: names, request: request)
        )
    }

    func hash(into hasher: inout Hasher) {
        // Hasher reads bytes as one stream: the parts hash as the string they spell.
        if self.scheme != .none {
            self.scheme.prefix.withUTF8Buffer { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
            self.authority.withBorrowedUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
        self.rest.withBorrowedUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    static func == (left: ResponseKey, right: ResponseKey) -> Bool {
        guard left.scheme == right.scheme else {
            // Split differently: compare what they spell.
            return Array(left.string.utf8) == Array(right.string.utf8)
        }
        return Self.bytesEqual(left.rest, right.rest) && Self.bytesEqual(left.authority, right.authority)
    }

    private static func bytesEqual(_ left: String, _ right: String) -> Bool {
        left.withBorrowedUTF8 { left in
            right.withBorrowedUTF8 { right in
                // The same storage (a stored key made from the very string asked for) needs no
                // comparing, as `String`'s own `==` knows.
                left.count == right.count
                    && (left.isEmpty || left.baseAddress == right.baseAddress
                        || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0)
            }
        }
    }
}
