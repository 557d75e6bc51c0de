import Foundation
import HTTPTypes

/// The keys under which responses are stored.
///
/// A response is stored under its URL (RFC 9111 §4), written the same way whatever the
/// request's spelling: scheme and host in lowercase, a default port dropped, an empty path as
/// `/`, the query kept whole. A response with `Vary` is stored under the URL together with the
/// request's values of the fields it names, so that one URL can hold a variant per value; the
/// URL's own key then holds the names, so that a later request can build its variant's key.
public enum CacheKey {
    /// The URL of `request` in the form keys use, or `nil` if it has no scheme or authority.
    public static func url(of request: HTTPRequest) -> String? {
        guard let scheme = request.scheme, let authority = request.authority else { return nil }
        return Self.normalized(scheme: scheme, authority: authority, path: request.path)
    }

    /// `url` in the form keys use, or `nil` if it is not absolute.
    public static func url(of url: URL) -> String? {
        guard let scheme = url.scheme, let host = url.host(percentEncoded: true) else { return nil }
        let authority = url.port.map { "\(Self.bracketed(host)):\($0)" } ?? Self.bracketed(host)
        var path = url.path(percentEncoded: true)
        if let query = url.query(percentEncoded: true) { path += "?" + query }
        return Self.normalized(scheme: scheme, authority: authority, path: path)
    }

    /// The key of the variant of `url` that `request` selects among responses varying on the
    /// lowercased field `names`.
    public static func variant(of url: String, names: [String], request: HTTPRequest) -> String {
        var key = url
        for name in names {
            key += "\n\(name): \(StoredResponse.normalizedValue(of: name, in: request.headerFields) ?? "")"
        }
        return key
    }

    /// `scheme://host[:port]` of a URL in key form.
    static func origin(of url: String) -> Substring {
        guard let schemeEnd = url.range(of: "://") else { return Substring(url) }
        let rest = url[schemeEnd.upperBound...]
        let end = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        return url[..<end]
    }

    private static func normalized(scheme: String, authority: String, path: String?) -> String {
        if let path, path.utf8.first == UInt8(ascii: "/"), Self.isNormalized(scheme: scheme, authority: authority) {
            // The usual case, already in key form: the parts copied into one allocation.
            let (schemeLength, authorityLength) = (scheme.utf8.count, authority.utf8.count)
            return String(unsafeUninitializedCapacity: schemeLength + 3 + authorityLength + path.utf8.count) { buffer in
                var offset = Self.copy(scheme, into: buffer, at: 0)
                offset = Self.copy("://", into: buffer, at: offset)
                offset = Self.copy(authority, into: buffer, at: offset)
                return Self.copy(path, into: buffer, at: offset)
            }
        }
        let scheme = scheme.lowercased()
        var authority = authority.lowercased()
        // Credentials are no part of the resource's identity.
        if let at = authority.lastIndex(of: "@") { authority = String(authority[authority.index(after: at)...]) }
        let defaultPort = scheme == "http" ? ":80" : scheme == "https" ? ":443" : nil
        if let defaultPort, authority.hasSuffix(defaultPort) { authority.removeLast(defaultPort.count) }
        var path = path ?? "/"
        if path.isEmpty || path.first == "?" { path = "/" + path }
        return "\(scheme)://\(authority)\(path)"
    }

    /// Whether the scheme is `http` or `https` and the authority has no capital letter, no
    /// credentials and no default port.
    private static func isNormalized(scheme: String, authority: String) -> Bool {
        let defaultPort: String
        switch scheme {
        case "https": defaultPort = ":443"
        case "http": defaultPort = ":80"
        default: return false
        }
        var authority = authority
        return authority.withUTF8 { bytes in
            for byte in bytes
            where (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || byte == UInt8(ascii: "@") {
                return false
            }
            // Compared as bytes: `String.hasSuffix` compares characters, and costs about as
            // much as the rest of the key.
            return !bytes.suffix(defaultPort.utf8.count).elementsEqual(defaultPort.utf8)
        }
    }

    /// Copies the UTF-8 of `part` into `buffer` at `offset`; returns the offset after it.
    private static func copy(_ part: String, into buffer: UnsafeMutableBufferPointer<UInt8>, at offset: Int) -> Int {
        var part = part
        return part.withUTF8 { bytes in
            guard let source = bytes.baseAddress else { return offset }
            (buffer.baseAddress! + offset).initialize(from: source, count: bytes.count)
            return offset + bytes.count
        }
    }

    private static func bracketed(_ host: String) -> String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
    }
}
