import Foundation

/// The http or https URL a command line names.
enum HTTPURL {
    /// `text` as an http or https URL with a host, its scheme in lower case (`HTTP://` is
    /// `http://`, as RFC 3986 §3.1 reads schemes); `nil` for anything else.
    static func parse(_ text: String) -> URL? {
        guard var components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else { return nil }
        components.scheme = scheme
        return components.url
    }
}
