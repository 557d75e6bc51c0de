import Foundation
import HTTPTypes

/// The keys under which responses are stored.
///
/// A response is stored under its URL (RFC 9111 §4), written the same way whatever the
/// request's spelling: scheme and host in lowercase, a default port dropped, a path that does
/// not start with `/` (an empty one, say) given one, the query kept whole. The URL's authority
/// is the request's `Host` field when it has one that is not empty, else its authority: the
/// target URI as the origin reconstructs it (RFC 9110 §7.1, §7.2), so that a proxy that sends
/// one origin the hosts of several sites stores each site apart. A response with
/// `Vary` is stored under the URL together with the request's values of the fields it names, so
/// that one URL can hold a variant per value; the URL's own key then holds the names, so that a
/// later request can build its variant's key.
public enum CacheKey {
    /// The URL of `request` in the form keys use, or `nil` if it has no scheme or authority.
    public static func url(of request: HTTPRequest) -> String? {
        guard let scheme = request.scheme, let authority = Self.authority(of: request) else { return nil }
        return Self.normalized(scheme: scheme, authority: authority, path: request.path)
    }

    /// The authority of `request`'s target URI: its `Host` field if it has one that is not
    /// empty, else its authority; `nil` with neither.
    static func authority(of request: HTTPRequest) -> String? {
        guard let authority = request.authority else { return nil }
        // Most requests carry no Host: its authority says it.
        if let host = request.headerFields[Self.host], !host.isEmpty { return host }
        return authority
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
        url + Self.variantSuffix(names: names, request: request)
    }

    /// What a variant's key adds to its URL's: a line `name: value` for each of `names`.
    static func variantSuffix(names: [String], request: HTTPRequest) -> String {
        var suffix = ""
        for name in names {
            suffix += "\n\(name): \(StoredResponse.normalizedValue(of: name, in: request.headerFields) ?? "")"
        }
        return suffix
    }

    /// `scheme://host[:port]` of a URL in key form.
    static func origin(of url: String) -> Substring {
        guard let schemeEnd = url.range(of: "://") else { return Substring(url) }
        let rest = url[schemeEnd.upperBound...]
        let end = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        return url[..<end]
    }

    private static func normalized(scheme: String, authority: String, path: String?) -> String {
        if let path, Self.isKeyForm(scheme: scheme, authority: authority, path: path) {
            // The usual case, already in key form.
            return Self.joined(scheme, "://", authority, path)
        }
        let scheme = scheme.lowercased()
        var authority = authority.lowercased()
        // Credentials are no part of the resource's identity.
        if let at = authority.lastIndex(of: "@") { authority = String(authority[authority.index(after: at)...]) }
        let defaultPort = scheme == "http" ? ":80" : scheme == "https" ? ":443" : nil
        if let defaultPort, authority.hasSuffix(defaultPort) { authority.removeLast(defaultPort.count) }
        var path = path ?? "/"
        // An empty path, a query alone, or a path not in origin form: never joined to the host.
        if path.utf8.first != UInt8(ascii: "/") { path = "/" + path }
        return "\(scheme)://\(authority)\(path)"
    }

    /// Whether a URL with these parts is in key form as they are: the scheme is `http` or
    /// `https`, the authority has no capital letter, no credentials, no default port and no
    /// `/`, and the path starts with `/`.
    static func isKeyForm(scheme: String, authority: String, path: String) -> Bool {
        guard path.utf8.first == UInt8(ascii: "/") else { return false }
        let defaultPort: StaticString
        switch scheme {
        case "https": defaultPort = ":443"
        case "http": defaultPort = ":80"
        default: return false
        }
        return authority.withBorrowedUTF8 { bytes in
            for byte in bytes
            where (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || byte == UInt8(ascii: "@")
                || byte == UInt8(ascii: "/")
            {
                return false
            }
            // Compared as bytes: `String.hasSuffix` compares characters, and costs about as
            // much as the rest of the key.
            return defaultPort.withUTF8Buffer { port in
                bytes.count < port.count
                    || memcmp(bytes.baseAddress! + bytes.count - port.count, port.baseAddress!, port.count) != 0
            }
        }
    }

    /// The parts joined, in one allocation.
    static func joined(_ first: String, _ second: String, _ third: String, _ fourth: String = "") -> String {
        let count = first.utf8.count + second.utf8.count + third.utf8.count + fourth.utf8.count
        return String(unsafeUninitializedCapacity: count) { buffer in
            var offset = Self.copy(first, into: buffer, at: 0)
            offset = Self.copy(second, into: buffer, at: offset)
            offset = Self.copy(third, into: buffer, at: offset)
            return Self.copy(fourth, into: buffer, at: offset)
        }
    }

    /// Copies the UTF-8 of `part` into `buffer` at `offset`; returns the offset after it.
    private static func copy(_ part: String, into buffer: UnsafeMutableBufferPointer<UInt8>, at offset: Int) -> Int {
        part.withBorrowedUTF8 { bytes in
            guard let source = bytes.baseAddress else { return offset }
            (buffer.baseAddress! + offset).initialize(from: source, count: bytes.count)
            return offset + bytes.count
        }
    }

    // "Host" is a valid field name, so the initializer cannot fail. (swift-http-types marks its
    // own `.host` unavailable, for HTTP/2's `:authority`.)
    private static let host = HTTPField.Name("Host")!

    private static func bracketed(_ host: String) -> String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
    }
}
