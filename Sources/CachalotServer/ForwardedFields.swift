import Foundation
import HTTPTypes

/// What a proxy changes in the fields it passes on (RFC 9110 §7.6): hop-by-hop fields go,
/// `Via` gains the proxy, and `Forwarded` says who asked (RFC 7239).
enum ForwardedFields {
    /// Fields that describe one connection, never passed on (RFC 9110 §7.6.1), besides those
    /// that `Connection` names. `Trailer` goes too: the proxy does not pass trailers on.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "trailer",
    ]

    /// Fields by which a client claims to be someone else, passed on only from a trusted proxy.
    static let forwarding: Set<String> = [
        "forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-real-ip",
    ]

    /// `fields` without their hop-by-hop fields: the fixed ones, `Proxy-*`, and every field
    /// that `Connection` names.
    static func removingHopByHop(_ fields: HTTPFields) -> HTTPFields {
        // Without `Connection`, only the fixed ones can go; most messages have none of them.
        guard fields.contains(where: { Self.isHopByHop($0.name.canonicalName) }) else { return fields }
        var named: Set<String> = []
        for value in fields[values: .connection] {
            for name in value.split(separator: ",") {
                named.insert(name.trimmingCharacters(in: .whitespaces).lowercased())
            }
        }
        return HTTPFields(
            fields.filter { field in
                let name = field.name.canonicalName
                return !Self.isHopByHop(name) && !named.contains(name)
            }
        )
    }

    /// Whether a field named `name` is hop-by-hop whether or not `Connection` names it.
    private static func isHopByHop(_ name: String) -> Bool {
        Self.hopByHop.contains(name) || name.hasPrefix("proxy-")
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
