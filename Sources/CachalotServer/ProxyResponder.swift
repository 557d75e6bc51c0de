import AsyncHTTPClient
import Cachalot
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// Answers the proxy's requests: from the loader's cache where the rules allow, else from the
/// origin, relaying the body as it arrives.
///
/// The request the origin sees is the client's, changed as a shared cache must: hop-by-hop
/// fields removed, `Via` and `Forwarded` added, forwarding fields from untrusted clients
/// dropped. A `HEAD` is sent to the origin as a `GET` so that its answer can be stored and
/// answer later `GET`s too (as nginx does by default).
struct ProxyResponder: Responder {
    let server: CacheServer

    private var configuration: CacheServer.Configuration { self.server.configuration }

    func respond(to request: ServerRequest, with writer: inout ResponseWriter) async throws -> Bool {
        let started = ContinuousClock.now
        let head = request.head
        if let (status, message) = self.refusal(of: head) {
            var response = HTTPResponse(status: status, headerFields: [.connection: "close"])
            response.headerFields[.cacheStatus] = "\(self.configuration.name); detail=bad-request"
            try await writer.respond(response, body: message + "\n")
            self.log(head, status: status.code, cacheStatus: "bad-request", bytes: 0, since: started)
            return false
        }
        let upstream = self.upstreamRequest(for: request)
        let answer: ResourceStream
        do {
            answer = try await self.server.loader.stream(upstream, body: request.body.map { Data(buffer: $0) })
        } catch let error as LoadError {
            let (status, detail) = Self.failure(error)
            var response = HTTPResponse(status: status)
            response.headerFields[.cacheStatus] =
                CacheStatus(name: self.configuration.name, forward: "miss", detail: detail).description
            response.headerFields[.date] = HTTPDate.format(Date())
            try await writer.respond(response, body: "\(status.reasonPhrase): \(detail)\n")
            self.server.logger.debug("The origin failed", metadata: ["error": "\(error)"])
            self.log(head, status: status.code, cacheStatus: detail, bytes: 0, since: started)
            return true
        }
        let status = CacheStatus(name: self.configuration.name, answer: answer)
        var response = answer.response
        response.headerFields = self.responseFields(response.headerFields, cacheStatus: status)
        try await writer.head(response)
        var sent = 0
        if head.method == .HEAD {
            try await writer.end()
            // The GET sent for a HEAD is read to its end, so that it is stored.
            if answer.isStoring { for try await _ in answer.body {} }
        } else {
            for try await piece in answer.body {
                try await writer.body(piece)
                sent += piece.count
            }
            try await writer.end()
        }
        self.log(head, status: response.status.code, cacheStatus: status.description, bytes: sent, since: started)
        // An HTTP/1.0 client learns where a body of unknown length ends by the connection closing.
        return head.version.minor >= 1 || response.headerFields[.contentLength] != nil
    }

    // MARK: - The request

    /// The status and message for a request that is refused before anything else, or `nil`.
    private func refusal(of head: HTTPRequestHead) -> (HTTPResponse.Status, String)? {
        if head.uri.utf8.count > self.configuration.limits.maximumRequestLine {
            return (
                .uriTooLong, "The request target is longer than \(self.configuration.limits.maximumRequestLine) bytes."
            )
        }
        let hosts = head.headers["host"]
        if hosts.count > 1 || (head.version.minor >= 1 && hosts.isEmpty) {
            return (.badRequest, "A request must have exactly one Host field (RFC 9112 §3.2).")
        }
        if head.method == .CONNECT {
            return (.notImplemented, "This proxy does not tunnel (CONNECT).")
        }
        guard self.path(of: head.uri) != nil else {
            return (.badRequest, "The request target must be a path (/…) or an absolute http URL.")
        }
        guard HTTPRequest.Method(head.method.rawValue) != nil else {
            return (.badRequest, "The method is not a token.")
        }
        return nil
    }

    /// The path and query of an origin-form or absolute-form target; `nil` for another form.
    private func path(of target: String) -> String? {
        if target.hasPrefix("/") { return target }
        guard let url = URL(string: target), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else { return nil }
        let path = url.path(percentEncoded: true)
        return (path.isEmpty ? "/" : path) + (url.query(percentEncoded: true).map { "?" + $0 } ?? "")
    }

    /// The request to send to the origin (or answer from the cache) for `request`.
    func upstreamRequest(for request: ServerRequest) -> HTTPRequest {
        let head = request.head
        let origin = self.configuration.origin
        let isTrusted = request.remote?.ipAddress.map { self.configuration.trustedProxies.contains($0) } ?? false
        let isRead = head.method == .GET || head.method == .HEAD
        var fields = HTTPFields()
        var connectionNamed: Set<String> = []
        for value in head.headers["connection"] {
            for name in value.split(separator: ",") {
                connectionNamed.insert(name.trimmingCharacters(in: .whitespaces).lowercased())
            }
        }
        for (name, value) in head.headers {
            let lowered = name.lowercased()
            if ForwardedFields.hopByHop.contains(lowered) || lowered.hasPrefix("proxy-")
                || connectionNamed.contains(lowered) || lowered == "host" || lowered == "expect"
            {
                continue
            }
            if !isTrusted && ForwardedFields.forwarding.contains(lowered) { continue }
            // The cache answers the client's own validators and ranges itself, from whole responses.
            if isRead && Self.clientOwned.contains(lowered) { continue }
            guard let fieldName = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: fieldName, value: value))
        }
        let clientHost = head.headers.first(name: "host")
        let client = request.remote?.ipAddress
        fields.append(
            HTTPField(
                name: .forwarded,
                value: ForwardedFields.forwardedElement(for: request.remote, host: clientHost, proto: "http")
            )
        )
        if let client { fields.append(HTTPField(name: .xForwardedFor, value: client)) }
        if !isTrusted || fields[.xForwardedProto] == nil { fields[.xForwardedProto] = "http" }
        if let clientHost, !isTrusted || fields[.xForwardedHost] == nil { fields[.xForwardedHost] = clientHost }
        ForwardedFields.addingVia("\(head.version.major).\(head.version.minor) \(self.configuration.name)", to: &fields)
        var base = origin.path(percentEncoded: true)
        while base.hasSuffix("/") { base.removeLast() }
        let method = head.method == .HEAD ? .get : (HTTPRequest.Method(head.method.rawValue) ?? .get)
        return HTTPRequest(
            method: method,
            scheme: origin.scheme?.lowercased() ?? "http",
            authority: Self.authority(of: origin),
            path: base + (self.path(of: head.uri) ?? "/"),
            headerFields: fields
        )
    }

    /// Fields of a `GET` or `HEAD` that the proxy evaluates itself against whole responses
    /// rather than passing on.
    private static let clientOwned: Set<String> = [
        "if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range",
    ]

    private static func authority(of url: URL) -> String {
        let host = url.host(percentEncoded: true) ?? ""
        let bracketed = host.contains(":") ? "[\(host)]" : host
        return url.port.map { "\(bracketed):\($0)" } ?? bracketed
    }

    // MARK: - The response

    /// The answer's fields as the client gets them: hop-by-hop fields removed, `Date` if the
    /// origin sent none, `Via`, and the proxy's `Cache-Status` after any from farther caches.
    private func responseFields(_ fields: HTTPFields, cacheStatus: CacheStatus) -> HTTPFields {
        var fields = ForwardedFields.removingHopByHop(fields)
        if fields[.date] == nil { fields[.date] = HTTPDate.format(Date()) }
        ForwardedFields.addingVia("1.1 \(self.configuration.name)", to: &fields)
        fields.append(HTTPField(name: .cacheStatus, value: cacheStatus.description))
        return fields
    }

    /// The status and `Cache-Status` detail for a load that failed before a response head.
    static func failure(_ error: LoadError) -> (HTTPResponse.Status, String) {
        if error.code == .invalidRequest { return (.badRequest, "invalid-request") }
        if error.code == .invalidResponse { return (.badGateway, "invalid-response") }
        if let client = error.underlying as? HTTPClientError,
            client == .deadlineExceeded || client == .readTimeout || client == .connectTimeout
        {
            return (.gatewayTimeout, "origin-timeout")
        }
        return (.badGateway, "origin-unreachable")
    }

    private func log(
        _ head: HTTPRequestHead,
        status: Int,
        cacheStatus: String,
        bytes: Int,
        since start: ContinuousClock.Instant
    ) {
        let elapsed = ContinuousClock.now - start
        self.server.logger.info(
            "\(head.method.rawValue) \(head.uri) \(status)",
            metadata: [
                "cache": "\(cacheStatus)",
                "bytes": "\(bytes)",
                "ms":
                    "\(Double(elapsed.components.attoseconds / 1_000_000_000_000) / 1_000 + Double(elapsed.components.seconds) * 1_000)",
            ]
        )
    }
}
