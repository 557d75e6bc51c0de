import Cachalot
import CachalotImages
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1

/// Answers the admin listener: `GET /healthz`, `/metrics`, and purges.
///
/// - `GET /healthz`: 200 `ok`, without a token.
/// - `GET /metrics`: the text ``CacheServer/Configuration/metricsText`` makes, if it is set.
/// - `POST /purge?url=/path` (or an absolute URL on the origin): removes that URL's stored
///   responses, every `Vary` variant included, and the image endpoint's variants of it. With
///   ``CacheServer/Configuration/keysHost``, an absolute URL may name any host: each host's
///   responses are stored under it.
/// - `POST /purge?prefix=/images/`: removes every stored response under that path prefix, and
///   the image endpoint's variants of them.
/// - `POST /purge?tag=product-42`: removes every stored response whose `Surrogate-Key` or
///   `Cache-Tag` names that tag.
///
/// Everything but `/healthz` needs `Authorization: Bearer <token>` when the server has an
/// ``CacheServer/Configuration/adminToken``; without it the answer is 401.
struct AdminResponder: Responder {
    /// Purges and trims wait on the disk tier: an admin connection's task runs off the loops.
    let runsOnEventLoop = false

    let server: CacheServer

    func respond(to request: ServerRequest, with writer: inout ResponseWriter) async throws -> Bool {
        let head = request.head
        let components = URLComponents(string: head.uri)
        let path = components?.path ?? head.uri
        if path == "/healthz" {
            try await writer.respond(
                HTTPResponse(status: .ok, headerFields: [.contentType: "text/plain"]),
                body: "ok\n"
            )
            return true
        }
        if let token = self.server.configuration.adminToken,
            !Self.constantTimeEquals(head.headers.first(name: "authorization") ?? "", "Bearer " + token)
        {
            try await writer.respond(
                HTTPResponse(status: .unauthorized, headerFields: [.wwwAuthenticate: "Bearer"]),
                body: "A bearer token is required.\n"
            )
            return true
        }
        if path == "/metrics", let metricsText = self.server.configuration.metricsText {
            try await writer.respond(
                HTTPResponse(status: .ok, headerFields: [.contentType: "text/plain; version=0.0.4"]),
                body: metricsText()
            )
            return true
        }
        guard path == "/purge" else {
            try await writer.respond(HTTPResponse(status: .notFound), body: "Not found: \(path)\n")
            return true
        }
        guard head.method == .POST || head.method == .PURGE else {
            try await writer.respond(
                HTTPResponse(status: .methodNotAllowed, headerFields: [.allow: "POST, PURGE"]),
                body: "Purge with POST.\n"
            )
            return true
        }
        let query = Dictionary(
            (components?.queryItems ?? []).compactMap { item in item.value.map { (item.name, $0) } },
            uniquingKeysWith: { first, _ in first }
        )
        let removed: Int
        do {
            if let target = query["url"], let url = self.originURL(target) {
                removed =
                    try await self.server.loader.removeResponses(for: url)
                    + (self.server.images?.1.removeVariants(of: url) ?? 0)
            } else if let prefix = query["prefix"], let url = self.originURL(prefix) {
                removed =
                    try await self.server.loader.removeResponses(withPrefix: url.absoluteString)
                    + (self.server.images?.1.removeVariants(withPrefix: url.absoluteString) ?? 0)
            } else if let tag = query["tag"], !tag.isEmpty {
                removed = try await self.server.loader.removeResponses(taggedWith: tag)
            } else {
                try await writer.respond(
                    HTTPResponse(status: .badRequest),
                    body: "Name what to purge: ?url=/path, ?prefix=/path/ (on the origin) or ?tag=name.\n"
                )
                return true
            }
        } catch {
            try await writer.respond(HTTPResponse(status: .internalServerError), body: "Purging failed: \(error)\n")
            return true
        }
        try await writer.respond(
            HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]),
            body: "{\"removed\":\(removed)}\n"
        )
        return true
    }

    /// `target` (a path, or an absolute URL on the origin) as the URL the loader stores it under.
    private func originURL(_ target: String) -> URL? {
        let origin = self.server.configuration.origin
        if target.hasPrefix("/") { return ProxyResponder(server: self.server).originURL(of: target) }
        guard let url = URL(string: target), url.host() != nil else { return nil }
        // Keyed by host, each host's responses are stored under it.
        guard self.server.configuration.keysHost || (url.host() == origin.host() && url.port == origin.port) else {
            return nil
        }
        return url
    }

    /// Compares without stopping at the first difference, so that timing does not tell how
    /// much of a guessed token was right.
    private static func constantTimeEquals(_ left: String, _ right: String) -> Bool {
        let (a, b) = (Array(left.utf8), Array(right.utf8))
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            difference |= (index < a.count ? a[index] : 0) ^ (index < b.count ? b[index] : 0)
        }
        return difference == 0
    }
}
