import Foundation
import HTTPTypes

/// What a redirect asks the client to do next (RFC 9110 §15.4), as a pure function of the
/// request, its body and the response: the loader follows redirects itself, so that each hop is
/// cached by its own rules under its own URL (RFC 9111 §3), never the target's response under
/// the first URL.
///
/// - 301, 302, 303, 307 and 308 with one `Location` are followed; 300 (no target chosen), 304
///   and 305 are answers.
/// - `Location` is resolved against the request's URL; the target must be `http` or `https`
///   with a host and a port from 1 to 65535. Anything else is not followed.
/// - 303 turns any method but `HEAD` into `GET` without a body, and so do 301 and 302 for
///   `POST`, as browsers, curl and OkHttp do; 307 and 308 keep the method and the body.
/// - A request that changes to `GET` loses the fields that described its body. One sent to
///   another origin (scheme, host or port) loses `Authorization`, `Proxy-Authorization` and
///   `Cookie`: credentials go only where they were given.
public enum Redirect {
    /// Whether `status` is a redirect that is followed (301, 302, 303, 307 or 308), if its
    /// `Location` allows.
    @inlinable
    public static func isFollowed(_ status: Int) -> Bool {
        switch status {
        case 301, 302, 303, 307, 308: true
        default: false
        }
    }

    /// The request to send next, with its body, or `nil` if `response` is not a redirect this
    /// client follows.
    public static func request(
        following response: HTTPResponse,
        to request: HTTPRequest,
        body: Data?
    ) -> (request: HTTPRequest, body: Data?)? {
        guard Self.isFollowed(response.status.code) else { return nil }
        let locations = response.headerFields[values: .location]
        guard locations.count == 1, let base = request.url, let target = Self.target(locations[0], from: base)
        else { return nil }
        let status = response.status.code
        var method = request.method
        var body = body
        var fields = request.headerFields
        if (status == 303 && method != .head) || ((status == 301 || status == 302) && method == .post) {
            method = .get
            body = nil
            let bodyFields: [HTTPField.Name] = [
                .contentType, .contentLength, .contentEncoding, .contentLanguage, .contentLocation, .transferEncoding,
            ]
            for name in bodyFields { fields[name] = nil }
        }
        if Self.origin(of: target) != Self.origin(of: base) {
            fields[.authorization] = nil
            fields[.proxyAuthorization] = nil
            fields[.cookie] = nil
        }
        var next = HTTPRequest(method: method, url: target)
        next.headerFields = fields
        return (next, body)
    }

    /// `location` resolved against `base`, or `nil` if it is not an `http` or `https` URL with a
    /// host and a valid port.
    static func target(_ location: String, from base: URL) -> URL? {
        let trimmed = location.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, let resolved = URL(string: trimmed, relativeTo: base)?.absoluteURL,
            let scheme = resolved.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = resolved.host(), !host.isEmpty
        else { return nil }
        if let port = resolved.port, !(1...65_535).contains(port) { return nil }
        return resolved
    }

    private static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(url.host()?.lowercased() ?? ""):\(port)"
    }
}
