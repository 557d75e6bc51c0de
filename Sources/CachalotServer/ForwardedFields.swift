import Cachalot
import Foundation
import HTTPTypes
import NIOCore

/// What a proxy changes in the fields it passes on (RFC 9110 §7.6): hop-by-hop fields go,
/// `Via` gains the proxy, and `Forwarded` says who asked (RFC 7239).
enum ForwardedFields {
    /// `Host`, which swift-http-types leaves to `HTTPRequest.authority`: set as a field, it is
    /// the host the origin is told, and the one the loader keys (see `CacheKey`).
    static let host = HTTPField.Name("Host")!

    /// Fields by which a client claims to be someone else, or to have asked for something other
    /// than what the request line and `Host` say (another path, method, scheme, port or host):
    /// passed on only from a trusted proxy. None is part of the cache key, so an origin that
    /// obeys one would otherwise store, under a key every client shares, what one client
    /// steered (cache poisoning). `X-Forwarded-Host` goes from trusted proxies too (see
    /// ``ProxyResponder/upstreamRequest(for:)``).
    static let forwarding: Set<String> = [
        // Who asked, and over what.
        "forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-real-ip",
        "x-forwarded-scheme", "x-forwarded-protocol", "x-forwarded-ssl", "front-end-https", "x-url-scheme",
        "x-forwarded-port", "x-forwarded-server", "x-client-ip", "true-client-ip", "x-cluster-client-ip",
        // Another host.
        "x-host", "x-original-host",
        // Another path (IIS, Symfony, Spring, nginx's ingress).
        "x-original-url", "x-rewrite-url", "x-original-uri", "x-forwarded-prefix", "x-forwarded-path",
        "x-forwarded-uri",
        // Another method.
        "x-http-method-override", "x-http-method", "x-method-override", "x-original-method",
    ]

    /// `text`, an IP address, in one spelling for each address, so that addresses compare as
    /// addresses: IPv6 in its shortest form, and an IPv4-mapped IPv6 address
    /// (`::ffff:127.0.0.1`, how a dual-stack listener sees an IPv4 peer) as the IPv4 address.
    /// Anything else (a host name, say) is returned as it is.
    static func canonicalAddress(_ text: String) -> String {
        // Parsed and written again (inet_pton, inet_ntop): one spelling per address.
        guard let address = try? SocketAddress(ipAddress: text, port: 0), let canonical = address.ipAddress else {
            return text
        }
        // inet_ntop writes an IPv4-mapped address as ::ffff:a.b.c.d.
        let mapped = "::ffff:"
        if canonical.hasPrefix(mapped),
            let v4 = try? SocketAddress(ipAddress: String(canonical.dropFirst(mapped.count)), port: 0), case .v4 = v4
        {
            return v4.ipAddress ?? text
        }
        return canonical
    }

    /// Whether `value` is a valid `Host` field value (RFC 9112 §3.2, RFC 3986 §3.2.2): a
    /// registered name, an IPv4 address or a bracketed IPv6 one, and an optional port; empty
    /// counts as valid. Nothing that could end the authority in a key (`/`, `?`, `#`, `@`) passes.
    static func isValidHost(_ value: String) -> Bool {
        // Read as bytes in place: a proxy checks this on every request.
        var value = value
        return value.withUTF8 { Self.isValidHost(bytes: $0[...]) }
    }

    private static func isValidHost(bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        var bytes = bytes
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return false }
            let literal = bytes[(bytes.startIndex + 1)..<close]
            guard !literal.isEmpty, literal.allSatisfy(Self.isAddressByte) else { return false }
            bytes = bytes[(close + 1)...]
            guard bytes.isEmpty || bytes.first == UInt8(ascii: ":") else { return false }
            return bytes.dropFirst().allSatisfy(Self.isDigit)
        }
        if let colon = bytes.lastIndex(of: UInt8(ascii: ":")) {
            guard bytes[(colon + 1)...].allSatisfy(Self.isDigit) else { return false }
            bytes = bytes[..<colon]
        }
        return bytes.allSatisfy(Self.isRegisteredNameByte)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// A byte of an IPv6 literal (hex digits, `:`, and `.` for an embedded IPv4 address).
    private static func isAddressByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"), UInt8(ascii: ":"), UInt8(ascii: "."):
            true
        default:
            false
        }
    }

    /// A byte of a registered name or an IPv4 address: unreserved, sub-delims or `%` (RFC 3986 §3.2.2).
    private static func isRegisteredNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"), UInt8(ascii: "%"), UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"),
            UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
            true
        default:
            false
        }
    }

    /// A `Forwarded` field value without its `host=` parameters (RFC 7239 §5.3), and without
    /// the elements left empty; `nil` if none is left.
    static func removingHost(from value: String) -> String? {
        var elements: [String] = []
        var pairs: [String] = []
        var pair = ""
        var isQuoted = false
        var isEscaped = false
        func endPair() {
            let trimmed = pair.trimmingCharacters(in: .whitespaces)
            pair = ""
            guard !trimmed.isEmpty, trimmed.prefix(while: { $0 != "=" }).lowercased() != "host" else { return }
            pairs.append(trimmed)
        }
        func endElement() {
            endPair()
            if !pairs.isEmpty { elements.append(pairs.joined(separator: ";")) }
            pairs = []
        }
        for character in value {
            if isEscaped {
                isEscaped = false
            } else if isQuoted {
                if character == "\\" { isEscaped = true }
                if character == "\"" { isQuoted = false }
            } else if character == "\"" {
                isQuoted = true
            } else if character == ";" {
                endPair()
                continue
            } else if character == "," {
                endElement()
                continue
            }
            pair.append(character)
        }
        endElement()
        return elements.isEmpty ? nil : elements.joined(separator: ", ")
    }

    /// `fields` without their hop-by-hop fields: the fixed ones, `Proxy-*`, and every field
    /// that `Connection` names.
    static func removingHopByHop(_ fields: HTTPFields) -> HTTPFields {
        // Without `Connection`, only the fixed ones can go; most messages have none of them.
        guard fields.contains(where: { Self.isHopByHop($0.name.canonicalName) }) else { return fields }
        let named = Self.namedByConnection(fields[values: .connection])
        return HTTPFields(
            fields.filter { field in
                let name = field.name.canonicalName
                return !Self.isHopByHop(name) && !named.contains(name)
            }
        )
    }

    /// The names of the fields that the `Connection` fields with `values` list, lowercased:
    /// hop-by-hop too.
    static func namedByConnection(_ values: some Sequence<String>) -> Set<String> {
        var named: Set<String> = []
        for value in values { named.formUnion(Self.connectionOptions(value)) }
        return named
    }

    /// The field names a `Connection` value lists (RFC 9110 §7.6.1: `#connection-option`),
    /// lowercased, without the optional whitespace around them; read as bytes, as a miss reads
    /// every origin's `Connection: keep-alive`.
    static func connectionOptions(_ value: String) -> [String] {
        value.utf8.split(separator: UInt8(ascii: ",")).compactMap { option in
            let isWhitespace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
            guard let first = option.firstIndex(where: { !isWhitespace($0) }),
                let last = option.lastIndex(where: { !isWhitespace($0) })
            else { return nil }
            return String(decoding: option[first...last].map { $0.asciiLowercased }, as: UTF8.self)
        }
    }

    /// Whether a field named `name` (lowercased) is hop-by-hop whether or not `Connection`
    /// names it, and so never passed on (RFC 9110 §7.6.1): one that a cache never stores
    /// (`Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding`, `Upgrade`, and `Trailer`, since
    /// the proxy does not pass trailers on), or any `Proxy-*`.
    static func isHopByHop(_ name: String) -> Bool {
        StoredResponse.isHopByHop(name) || name.hasPrefix("proxy-")
    }

    /// The request's `Forwarded` element for a client at the IP address `ip` that asked for
    /// `host` over `proto` (RFC 7239 §4–6).
    static func forwardedElement(for ip: String?, host: String?, proto: String) -> String {
        var element = "for=" + Self.node(ip)
        if let host, !host.isEmpty { element += ";host=" + Self.quoted(host) }
        element += ";proto=" + proto
        return element
    }

    /// The client's node in a `Forwarded` element: an IPv4 address as it is, an IPv6 one in
    /// quoted brackets, `unknown` when not known.
    private static func node(_ ip: String?) -> String {
        guard let ip else { return "unknown" }
        return ip.utf8.contains(UInt8(ascii: ":")) ? "\"[\(ip)]\"" : ip
    }

    private static func quoted(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
            return "\"" + text + "\""
        }
        var quoted = "\""
        for character in text {
            if character == "\"" || character == "\\" { quoted.append("\\") }
            quoted.append(character)
        }
        return quoted + "\""
    }
}

extension HTTPField.Name {
    static let forwarded = HTTPField.Name("Forwarded")!
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
    static let xForwardedHost = HTTPField.Name("X-Forwarded-Host")!
    static let xForwardedProto = HTTPField.Name("X-Forwarded-Proto")!
    static let cacheStatus = HTTPField.Name("Cache-Status")!
}

extension UInt8 {
    /// The byte with an ASCII capital letter made small; any other byte as it is.
    var asciiLowercased: UInt8 {
        self >= UInt8(ascii: "A") && self <= UInt8(ascii: "Z") ? self | 0x20 : self
    }
}

extension String {
    /// Whether the string is `lowercased` but for the case of its ASCII letters, as field names
    /// compare (RFC 9110 §5.1); compared as bytes, without making a lowercased copy.
    func equalsIgnoringASCIICase(_ lowercased: StaticString) -> Bool {
        lowercased.withUTF8Buffer { expected in
            self.utf8.count == expected.count && zip(self.utf8, expected).allSatisfy { $0.asciiLowercased == $1 }
        }
    }
}
