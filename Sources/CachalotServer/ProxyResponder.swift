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
/// fields removed, `Via` and `Forwarded` added, forwarding and override fields from untrusted
/// clients dropped, and the client's `Host` passed on only where it is part of the cache key
/// (``CacheServer/Configuration/keysHost``). A `HEAD` is sent to the origin as a `GET` so that
/// its answer can be stored and answer later `GET`s too (as nginx does by default).
///
/// A class: each of a connection's requests uses it, and a copy of its fields would cost a
/// retain and a release of each.
final class ProxyResponder: Responder {
    /// A connection's task runs on its loop: the loader reads and writes files elsewhere, and
    /// the image endpoint's work goes off the loop (``respond(to:with:)``).
    let runsOnEventLoop = true
    let server: CacheServer
    /// The origin's scheme, authority and base path (without its last `/`), read once.
    private let origin: (scheme: String, authority: String, base: String)
    /// The image endpoint, if the server has one: it answers the paths under its prefix.
    private let images: ImageResponder?
    /// ``CacheServer/Configuration/trustedProxies``, each address in its canonical spelling.
    private let trustedProxies: Set<String>
    /// The proxy's element of `Via` in its responses, and as the field of a request over HTTP/1.1.
    private let via: String
    private let viaField: HTTPField
    /// The `X-Forwarded-Proto` the proxy sends: it listens over plain HTTP.
    private static let forwardedProto = HTTPField(name: .xForwardedProto, value: "http")

    init(server: CacheServer) {
        self.server = server
        let url = server.configuration.origin
        let host = url.host(percentEncoded: true) ?? ""
        let bracketed = host.contains(":") ? "[\(host)]" : host
        var base = url.path(percentEncoded: true)
        while base.hasSuffix("/") { base.removeLast() }
        self.origin = (url.scheme?.lowercased() ?? "http", url.port.map { "\(bracketed):\($0)" } ?? bracketed, base)
        let origin = "\(self.origin.scheme)://\(self.origin.authority)\(self.origin.base)"
        self.images = server.images.map { endpoint, pipeline in
            ImageResponder(server: server, endpoint: endpoint, pipeline: pipeline, origin: origin)
        }
        self.trustedProxies = Set(server.configuration.trustedProxies.map(ForwardedFields.canonicalAddress))
        self.via = "1.1 \(server.configuration.name)"
        self.viaField = HTTPField(name: .via, value: self.via)
    }

    private var configuration: CacheServer.Configuration { self.server.configuration }

    func respond(to request: ServerRequest, with writer: inout ResponseWriter) async throws -> Bool {
        if let images = self.images, images.claims(request.head.uri), self.refusal(of: request.head) == nil {
            // The image pipeline reads its originals and variants from disk as it goes, and so do
            // the flights it starts: all of it off the loop.
            return try await withBlockingAllowed { () async throws in
                try await images.respond(to: request, with: &writer)
            }
        }
        let started = ContinuousClock.now
        let head = request.head
        if let (status, message) = self.refusal(of: head) {
            var response = HTTPResponse(status: status, headerFields: [.connection: "close"])
            response.headerFields[.cacheStatus] = "\(self.configuration.name); detail=bad-request"
            try await writer.respond(response, body: message + "\n")
            self.server.log(request, status: status.code, cacheStatus: "bad-request", bytes: 0, since: started)
            self.server.metrics?.request(.error, bytes: 0)
            return false
        }
        let answer: ResourceStream
        do {
            answer = try await self.server.loader.stream(
                // A request with a body was not prepared on its loop: memory is looked in here,
                // the disk where the loader allows waiting.
                request.prepared ?? self.server.loader.prepare(self.upstreamRequest(for: request), readsDisk: false),
                body: request.body.map { Data(buffer: $0) },
                interim: writer.interim
            )
            if answer.forwardReason != nil { self.server.metrics?.originAnswered(after: ContinuousClock.now - started) }
        } catch let error as LoadError {
            let (status, detail) = Self.failure(error)
            var response = HTTPResponse(status: status)
            response.headerFields[.cacheStatus] =
                CacheStatus(name: self.configuration.name, forward: "miss", detail: detail).description
            response.headerFields[.date] = DateField.text()
            try await writer.respond(response, body: "\(status.reasonPhrase): \(detail)\n")
            self.server.logger.debug("The origin failed", metadata: ["error": "\(error)"])
            self.server.log(request, status: status.code, cacheStatus: detail, bytes: 0, since: started)
            self.server.metrics?.request(.error, bytes: 0)
            return true
        }
        let reply = self.reply(to: request, with: answer)
        if !reply.keepsAlive { writer.closesConnection = true }
        writer.head(reply.head)
        var sent = 0
        // Logged however the sending ends: a client that closes as soon as it has the last byte
        // cancels this task, often before the end is written, and its response went all the same.
        defer { self.finish(reply, to: request, bytes: sent, since: started) }
        switch reply.body {
        case .none:
            try await writer.end()
            try await Self.finishStoring(answer)
        case .whole where answer.source != .network:
            // An answer from the cache is in hand, in one piece: it goes with its head and end at once.
            var whole = Data()
            for try await piece in answer.body { whole = whole.isEmpty ? piece : whole + piece }
            try await writer.whole(whole)
            sent = whole.count
        case .whole:
            // The origin's head goes at once: its body may be slow to come, or stall.
            try await writer.flushHead()
            for try await piece in answer.body {
                try await writer.body(piece)
                sent += piece.count
            }
            try await writer.end()
        case .partial(let partial):
            try await partial.relay(answer.body) { piece in
                try await writer.body(piece)
                sent += piece.count
            }
            try await writer.end()
        }
        return reply.keepsAlive
    }

    /// Prepares the loader's load of `request` (``ServerRequest/prepared``), without waiting on
    /// anything, and returns the whole response to it when the cache answers it at once: its
    /// answer is in memory and its body at most ``largestImmediateBody``; its head and its
    /// body's pieces, logged and counted. `nil` for anything else, which
    /// ``respond(to:with:)`` answers, resuming what was prepared.
    ///
    /// `memo` is the connection's last request for the origin (see ``UpstreamMemo``): reused if
    /// this one fits it, with only the target's length checked, and else left as this one's.
    func prepare(
        _ request: inout ServerRequest,
        memo: inout UpstreamMemo?
    ) -> (head: ClientHead, body: [Data], keepsAlive: Bool)? {
        let started = ContinuousClock.now
        let head = request.head
        guard head.method.isGetOrHead, request.body == nil, self.images?.claims(head.uri) != true else { return nil }
        let upstream: HTTPRequest
        if let kept = memo, kept.fits(head) {
            // The method, the form and the fields are those of a request that passed
            // `refusal(of:)`: of its checks, only the target's length is left.
            guard head.uri.utf8.count <= self.configuration.limits.maximumRequestLine else { return nil }
            upstream = kept.request(path: self.origin.base + head.uri)
        } else {
            guard self.refusal(of: head) == nil else { return nil }
            upstream = self.upstreamRequest(for: request)
            if head.uri.utf8.first == UInt8(ascii: "/") { memo = UpstreamMemo(head, upstream) }
        }
        // The memory tier, and of the disk only whether the key's file is there: a disk read may
        // wait on another process's lock or write the journal, and an event loop must not wait.
        // A disk hit goes by the connection's task, which reads the disk off the loop; a miss is
        // decided here.
        guard let prepared = try? self.server.loader.prepare(upstream, readsDisk: false) else { return nil }
        // Kept with the request only when the connection's task resumes it: a hit needs no copy.
        guard let resource = prepared.answer, resource.body.count <= Self.largestImmediateBody else {
            request.prepared = prepared
            return nil
        }
        let reply = self.reply(to: request, with: resource)
        let body: [Data]
        switch reply.body {
        case .none: body = []
        case .whole: body = resource.body.isEmpty ? [] : [resource.body]
        case .partial(let partial): body = partial.body(of: resource.body)
        }
        self.finish(reply, to: request, bytes: body.reduce(0) { $0 + $1.count }, since: started)
        return (reply.head, body, reply.keepsAlive)
    }

    /// The largest body answered at once, on the connection's event loop: larger ones go in
    /// slices, each written when the client has taken the one before.
    static let largestImmediateBody = 1 << 20

    /// What the proxy answers with, before its body goes.
    private struct Reply {
        /// The head as the client gets it.
        var head: ClientHead
        var body: Body
        /// Its `Cache-Status` member, as the head and the access log have it.
        var cacheStatus: CacheStatus
        /// Whether the connection may stay open after it: an HTTP/1.0 client learns where a body
        /// of unknown length ends by the connection closing.
        var keepsAlive: Bool
    }

    /// What a response carries to the client.
    private enum Body {
        /// None: the answer to a `HEAD`, a 304, 412 or 416 made by the proxy.
        case none
        /// The answer's body as it is.
        case whole
        /// Some ranges of it.
        case partial(PartialContent)
    }

    /// The response to send for `answer`, its fields as the client gets them (see
    /// ``ClientHead``).
    private func reply(to request: ServerRequest, with answer: ResourceStream) -> Reply {
        let cacheStatus = CacheStatus(name: self.configuration.name, answer: answer)
        let (response, body) =
            self.evaluatesClientConditions(request, status: answer.response.status.code)
            ? self.content(for: request, with: answer.response, length: answer.length)
            : (answer.response, request.head.method.isHead ? .none : .whole)
        var head = ClientHead(response, knownLength: answer.length != nil, via: self.via)
        head.finish(age: nil, cacheStatus: cacheStatus)
        return self.reply(to: request, head: head, body: body, cacheStatus: cacheStatus)
    }

    /// The response to send for `resource`, a whole answer from the cache. Unless the client's
    /// own preconditions or `Range` make another response of it, its head is the one kept with
    /// the stored response, with its `Age`, `Date` if it has none, and `Cache-Status` added.
    private func reply(to request: ServerRequest, with resource: Resource) -> Reply {
        let cacheStatus = CacheStatus(name: self.configuration.name, resource: resource)
        var head: ClientHead
        let body: Body
        if self.evaluatesClientConditions(request, status: resource.statusCode) {
            let response: HTTPResponse
            (response, body) = self.content(for: request, with: resource.response, length: resource.body.count)
            head = ClientHead(response, knownLength: true, via: self.via)
            head.finish(age: nil, cacheStatus: cacheStatus)
        } else {
            head = ClientHead(
                resource.derivedFromHead { [via = self.via] in
                    ClientHead.Kept($0, knownLength: true, via: via).writingFields()
                }
            )
            if head.via == self.via {
                head.finish(age: resource.age, cacheStatus: cacheStatus)
            } else {
                // Kept by a server of another name that shares the loader: made again, not kept.
                head = ClientHead(resource.response, knownLength: true, via: self.via)
                head.finish(age: nil, cacheStatus: cacheStatus)
            }
            body = request.head.method.isHead ? .none : .whole
        }
        return self.reply(to: request, head: head, body: body, cacheStatus: cacheStatus)
    }

    private func reply(
        to request: ServerRequest,
        head: ClientHead,
        body: Body,
        cacheStatus: CacheStatus
    ) -> Reply {
        let keepsAlive = request.head.version.minor >= 1 || head.hasContentLength
        return Reply(head: head, body: body, cacheStatus: cacheStatus, keepsAlive: keepsAlive)
    }

    /// Whether the client's own preconditions and `Range` are to be evaluated against an answer
    /// with `status`: for a `GET` or `HEAD` (``content(for:with:length:)``) only when it has any,
    /// and the answer is a 2xx.
    private func evaluatesClientConditions(_ request: ServerRequest, status: Int) -> Bool {
        let method = request.head.method
        guard method.isGetOrHead else { return true }
        return (200..<300).contains(status) && request.head.headers.contains { Self.isClientOwned($0.name) }
    }

    /// Logs and counts a response that went.
    private func finish(_ reply: Reply, to request: ServerRequest, bytes: Int, since started: ContinuousClock.Instant) {
        self.server.log(
            request,
            status: Int(reply.head.status.code),
            cacheStatus: reply.cacheStatus.description,
            bytes: bytes,
            since: started
        )
        self.server.metrics?.request(reply.cacheStatus.hit ? .hit : .forward, bytes: bytes)
    }

    /// The answer's `response` itself, or what the client's own preconditions and `Range` make
    /// of it (RFC 9110 §13.2.2: preconditions first, then the range), from the whole
    /// representation of `length` bytes, if known.
    private func content(for request: ServerRequest, with response: HTTPResponse, length: Int?) -> (HTTPResponse, Body)
    {
        let head = request.head
        guard head.method.isGetOrHead, (200..<300).contains(response.status.code) else {
            return (response, head.method.isHead ? .none : .whole)
        }
        let client = Self.clientRequest(request)
        switch Preconditions.evaluate(client, against: response) {
        case .notModified:
            return (Preconditions.notModified(from: response), .none)
        case .preconditionFailed:
            return (HTTPResponse(status: .preconditionFailed, headerFields: [.contentLength: "0"]), .none)
        case .proceed:
            break
        }
        guard head.method == .GET else { return (response, .none) }
        switch ByteRanges.evaluate(client, response: response, length: length) {
        case .whole:
            return (response, .whole)
        case .unsatisfiable:
            var refusal = HTTPResponse(status: .rangeNotSatisfiable, headerFields: [.contentLength: "0"])
            refusal.headerFields[.contentRange] = "bytes */\(length ?? 0)"
            return (refusal, .none)
        case .partial(let ranges):
            let partial = PartialContent(
                ranges: ranges,
                length: length ?? 0,
                contentType: response.headerFields[.contentType]
            )
            return (partial.response(from: response), .partial(partial))
        }
    }

    /// The client's request as it came, for its preconditions and `Range`.
    private static func clientRequest(_ request: ServerRequest) -> HTTPRequest {
        HTTPRequest(
            method: HTTPRequest.Method(request.head.method.spelling) ?? .get,
            scheme: nil,
            authority: nil,
            path: request.head.uri,
            headerFields: request.fields
        )
    }

    /// Reads the rest of a body whose client does not want it (a `HEAD`, a 304), so that it is
    /// stored: only if it is being stored and its length is known, which bounds the reading.
    private static func finishStoring(_ answer: ResourceStream) async throws {
        guard answer.isStoring, answer.length != nil else { return }
        for try await _ in answer.body {}
    }

    // MARK: - The request

    /// The status and message for a request that is refused before anything else, or `nil`.
    private func refusal(of head: HTTPRequestHead) -> (HTTPResponse.Status, String)? {
        if head.uri.utf8.count > self.configuration.limits.maximumRequestLine {
            return (
                .uriTooLong, "The request target is longer than \(self.configuration.limits.maximumRequestLine) bytes."
            )
        }
        // Counted without collecting the values: a proxy checks this on every request.
        var hosts = 0
        var host: String?
        for (name, value) in head.headers where name.equalsIgnoringASCIICase("host") {
            hosts += 1
            host = value
        }
        if hosts > 1 || (head.version.minor >= 1 && hosts == 0) {
            return (.badRequest, "A request must have exactly one Host field (RFC 9112 §3.2).")
        }
        if let host, !ForwardedFields.isValidHost(host) {
            return (.badRequest, "The Host field must be a host name or an IP address, and a port (RFC 9112 §3.2).")
        }
        if case .CONNECT = head.method {
            return (.notImplemented, "This proxy does not tunnel (CONNECT).")
        }
        guard self.path(of: head.uri) != nil else {
            return (.badRequest, "The request target must be a path (/…) or an absolute http URL.")
        }
        // NIO's own methods are tokens; only one it does not know needs checking.
        if case .RAW(value: let method) = head.method, HTTPRequest.Method(method) == nil {
            return (.badRequest, "The method is not a token.")
        }
        return nil
    }

    /// The path and query of an origin-form or absolute-form target; `nil` for another form.
    private func path(of target: String) -> String? {
        if target.utf8.first == UInt8(ascii: "/") { return target }
        guard let url = URL(string: target), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else { return nil }
        let path = url.path(percentEncoded: true)
        return (path.isEmpty ? "/" : path) + (url.query(percentEncoded: true).map { "?" + $0 } ?? "")
    }

    /// The request for the origin that one of a connection's `GET` or `HEAD` requests made, and
    /// what it was made from: the requests of a connection mostly carry the same fields, and
    /// converting them costs more than the rest of a hit, and so does checking them again
    /// (``refusal(of:)``): a request that fits the memo has the fields that passed. Only a
    /// request whose target is a path (origin-form) is kept, since an absolute-form target may
    /// name a host of its own.
    struct UpstreamMemo {
        private let isHead: Bool
        private let version: HTTPVersion
        private let headers: HTTPHeaders
        private let request: HTTPRequest

        /// The memo of `upstream`, made for `head`, a `GET` or `HEAD` in origin-form that
        /// ``refusal(of:)`` let through.
        fileprivate init(_ head: HTTPRequestHead, _ upstream: HTTPRequest) {
            self.isHead = head.method.isHead
            self.version = head.version
            self.headers = head.headers
            self.request = upstream
        }

        /// Whether the request for `head`, a `GET` or `HEAD`, is the memo's with its own path: it
        /// is in origin-form, its method is the same, its version the same, and so are its fields
        /// (by name and value, in order, spelt alike). Its client is the same: the connection's.
        fileprivate func fits(_ head: HTTPRequestHead) -> Bool {
            self.isHead == head.method.isHead && self.version == head.version
                && head.uri.utf8.first == UInt8(ascii: "/") && Self.areSame(self.headers, head.headers)
        }

        /// The memo's request, for `path`.
        fileprivate func request(path: String) -> HTTPRequest {
            var upstream = self.request
            if upstream.path != path { upstream.path = path }
            return upstream
        }

        /// Whether `a` and `b` have the same lines, in the same order and spelling.
        private static func areSame(_ a: HTTPHeaders, _ b: HTTPHeaders) -> Bool {
            guard a.count == b.count else { return false }
            for (line, other) in zip(a, b) where line.name != other.name || line.value != other.value { return false }
            return true
        }
    }

    /// The request to send to the origin (or answer from the cache) for `request`.
    ///
    /// Its URL is the origin's. With ``CacheServer/Configuration/keysHost`` it carries the
    /// client's host in `Host`, which the loader keys it by (see `CacheKey`), and says it in
    /// `X-Forwarded-Host` and `Forwarded: host=`; without, the origin sees its own authority and
    /// no host of the client's in any field, trusted proxy or not: nothing unkeyed that an
    /// origin could build a link from.
    func upstreamRequest(for request: ServerRequest) -> HTTPRequest {
        let head = request.head
        let clientIP = request.client.ip
        // Asked only with proxies to trust: a set hashes what it is asked for even when empty.
        let isTrusted =
            !self.trustedProxies.isEmpty && request.client.canonicalIP.map { self.trustedProxies.contains($0) } == true
        let isRead = head.method.isGetOrHead
        let keyedHost = self.configuration.keysHost ? self.clientHost(of: head) : nil
        // Made in one pass over NIO's fields, in the order the origin gets them: a hit makes this
        // request too, for its key and its variant, and needs no other conversion of them.
        let named = ForwardedFields.namedByConnection(head.headers["connection"])
        var fields = HTTPFields()
        fields.reserveCapacity(head.headers.count + 6)
        var hasProto = false
        for (spelling, value) in head.headers {
            // Every request has one, never passed on: dropped before its name is made.
            if spelling.equalsIgnoringASCIICase("host") { continue }
            // The parser (RequestParser) admits only tokens as names: none is dropped here.
            guard let fieldName = HTTPField.Name(spelling) else { continue }
            let name = fieldName.canonicalName
            // The cache answers the client's own validators and ranges itself, from whole responses.
            guard !ForwardedFields.isHopByHop(name), named.isEmpty || !named.contains(name),
                name != "expect", name != "x-forwarded-host",
                isTrusted || !ForwardedFields.forwarding.contains(name),
                !(isRead && Self.isClientOwned(name))
            else { continue }
            if name == "forwarded" {
                // A trusted proxy's elements, without the host it was asked for.
                guard let kept = ForwardedFields.removingHost(from: value) else { continue }
                fields.append(HTTPField(name: fieldName, value: kept))
            } else {
                // A trusted proxy's `X-Forwarded-Proto` stays; an untrusted client's went above.
                if name == "x-forwarded-proto" { hasProto = true }
                fields.append(HTTPField(name: fieldName, value: value))
            }
        }
        fields.append(
            keyedHost.map {
                HTTPField(
                    name: .forwarded,
                    value: ForwardedFields.forwardedElement(for: clientIP, host: $0, proto: "http")
                )
            } ?? request.client.forwarded
        )
        if let forwardedFor = request.client.forwardedFor { fields.append(forwardedFor) }
        if !hasProto { fields.append(Self.forwardedProto) }
        if let keyedHost {
            fields.append(HTTPField(name: ForwardedFields.host, value: keyedHost))
            fields.append(HTTPField(name: .xForwardedHost, value: keyedHost))
        }
        // A request's `Via` names the client's protocol version; the responses' element is for 1.1.
        fields.append(
            head.version == .http1_1
                ? self.viaField
                : HTTPField(
                    name: .via,
                    value: "\(head.version.major).\(head.version.minor) \(self.configuration.name)"
                )
        )
        let method = head.method == .HEAD ? .get : (HTTPRequest.Method(head.method.spelling) ?? .get)
        return HTTPRequest(
            method: method,
            scheme: self.origin.scheme,
            authority: self.origin.authority,
            path: self.origin.base + (self.path(of: head.uri) ?? "/"),
            headerFields: fields
        )
    }

    /// The host the client asked for: the authority of an absolute-form target, else the `Host`
    /// field (RFC 9112 §3.2.2), lowercased; `nil` if it is empty or absent (an HTTP/1.0
    /// request without one).
    private func clientHost(of head: HTTPRequestHead) -> String? {
        var host = head.headers.first(name: "host")
        if !head.uri.hasPrefix("/"), let url = URL(string: head.uri), let name = url.host(percentEncoded: true) {
            let bracketed = name.contains(":") ? "[\(name)]" : name
            host = url.port.map { "\(bracketed):\($0)" } ?? bracketed
        }
        guard let host, !host.isEmpty else { return nil }
        return host.lowercased()
    }

    /// The URL on the origin that the path and query `path` stands for.
    func originURL(of path: String) -> URL? {
        URL(string: "\(self.origin.scheme)://\(self.origin.authority)\(self.origin.base)\(path)")
    }

    /// Fields of a `GET` or `HEAD` that the proxy evaluates itself against whole responses
    /// rather than passing on.
    private static let clientOwned: [StaticString] = [
        "if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range",
    ]

    /// Whether the field name `name`, in any case, is one of ``clientOwned``; compared as bytes,
    /// since every hit asks.
    static func isClientOwned(_ name: String) -> Bool {
        // Their lengths first: most names are none of them.
        switch name.utf8.count {
        case 5, 8, 13, 17, 19: Self.clientOwned.contains { name.equalsIgnoringASCIICase($0) }
        default: false
        }
    }

    // MARK: - The response

    /// The status and `Cache-Status` detail for a load that failed before a response head.
    static func failure(_ error: LoadError) -> (HTTPResponse.Status, String) {
        if error.code == .invalidRequest { return (.badRequest, "invalid-request") }
        if error.code == .invalidResponse { return (.badGateway, "invalid-response") }
        if let failure = error.underlying as? HTTPTransportError {
            if failure.isTimeout { return (.gatewayTimeout, "origin-timeout") }
            if failure.code == .invalidResponse { return (.badGateway, "invalid-response") }
        }
        return (.badGateway, "origin-unreachable")
    }
}

extension HTTPMethod {
    /// The method as it is spelt on the wire: NIO's `rawValue` spells `M-SEARCH` without its
    /// hyphen, which would forward another method.
    var spelling: String {
        self == .MSEARCH ? "M-SEARCH" : self.rawValue
    }

    /// Whether it is `GET` or `HEAD`, told by its case: NIO compares two methods by spelling
    /// them, which a hit did several times over.
    var isGetOrHead: Bool {
        switch self {
        case .GET, .HEAD: true
        default: false
        }
    }

    /// Whether it is `HEAD`, told by its case.
    var isHead: Bool {
        if case .HEAD = self { true } else { false }
    }
}
