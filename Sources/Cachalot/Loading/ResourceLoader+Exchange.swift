import Foundation
import HTTPTypes
import Logging

/// The exchange with the origin that every load shares: one request to its head, made
/// conditional when it validates a stored response; a 304 merged into the stored response;
/// a stored response standing in for an origin that failed (`stale-if-error`); and the
/// invalidations that the answer to an unsafe method makes.
extension ResourceLoader {
    /// What the origin's answer to a request came to, its body not yet read.
    enum Exchanged: Sendable {
        /// An answer made from the stored response: freshened by a 304, or stale for an origin
        /// error.
        case answered(Resource)
        /// A response to answer with, its body still to be read.
        case response(Incoming)
    }

    /// What one request's answer came to: ``Exchanged``, or a 304 about another representation
    /// than the stored one.
    private enum Exchange {
        case exchanged(Exchanged)
        case notSelected
    }

    /// A response whose body is still to be read, and what storing it takes.
    struct Incoming: Sendable {
        var reply: HTTPTransportResponse
        /// The request as sent (with the validators the loader added).
        var sent: HTTPRequest
        var request: HTTPRequest
        var stored: StoredResponse
        var url: ResponseKey
        /// The key it is stored under and the names its URL's responses vary on; `nil` if the
        /// rules forbid storing it, or its `Content-Length` is over the largest entry stored.
        var storage: (key: ResponseKey, names: [String])?
        /// The body's announced length; `nil` if unknown, and for the answers that have no body.
        var expectedLength: Int?
    }

    /// Sends `request` through the transport, with `interim` if there is one.
    ///
    /// - Throws: ``LoadError/Code/invalidRequest`` as the transport threw it;
    ///   ``LoadError/Code/transport`` for anything else it threw (its error as `underlying`);
    ///   `CancellationError` if the task was cancelled.
    private func send(_ request: HTTPRequest, body: Data?, interim: Interim?) async throws -> HTTPTransportResponse {
        do {
            guard let interim else { return try await self.transport.send(request, body: body) }
            return try await self.transport.send(request, body: body, interim: interim)
        } catch let error as LoadError where error.code == .invalidRequest {
            throw error
        } catch {
            try Task.checkCancellation()
            throw LoadError(
                .transport,
                "The request to \(request.url?.absoluteString ?? "?") failed: \(error)",
                underlying: error
            )
        }
    }

    /// Sends `request` (conditionally, if `validating` a stored response) and reads the answer's
    /// head: a 304 or an origin error that a stored response answers is settled here. A 304
    /// about another representation than the stored one is asked again without validators.
    ///
    /// - Parameter run: The flight whose callers are answered; with it, a response freshened
    ///   in memory goes to the other tiers once they have their answer.
    func exchange(
        _ request: HTTPRequest,
        key: ResponseKey,
        validating cached: CachedResponse?,
        run: Run?,
        interim: Interim?
    ) async throws -> Exchanged {
        var validating = cached
        while true {
            switch try await self.exchangeOnce(request, key: key, validating: validating, run: run, interim: interim) {
            case .exchanged(let exchanged): return exchanged
            case .notSelected: validating = nil
            }
        }
    }

    /// One request of ``exchange(_:key:validating:run:interim:)``.
    private func exchangeOnce(
        _ request: HTTPRequest,
        key: ResponseKey,
        validating cached: CachedResponse?,
        run: Run?,
        interim: Interim?
    ) async throws -> Exchange {
        let rules = self.configuration.rules
        let sent = cached.map { rules.conditionalRequest(for: request, stored: $0.stored) } ?? request
        let requestTime = self.now()
        let reply: HTTPTransportResponse
        do {
            reply = try await self.send(sent, body: nil, interim: interim)
        } catch let error as LoadError where error.code == .transport {
            let now = self.now()
            if let cached, rules.mayUseStaleWhenUnreachable(cached.stored, for: request, at: now) {
                self.logger.debug(
                    "The origin failed; answering stale",
                    metadata: ["key": "\(key.string)", "error": "\(error)"]
                )
                let allowed = rules.mayUseStaleOnError(cached.stored, for: request, at: now)
                let source = Resource.Source.stale(allowed ? .originError : .unreachable)
                return .exchanged(.answered(LoadPlan.answer(cached, source: source, at: now, rules: rules)))
            }
            throw error
        }
        let responseTime = self.now()
        let status = reply.response.status.code
        try Self.check(reply.response, to: sent, url: key.string)
        if let cached {
            self.counters.validation(notModified: status == 304)
            if status == 304 {
                _ = try await ResponseBody(reply, to: sent, loader: self).collect()
                guard
                    let freshened = rules.freshened(
                        cached.stored,
                        with: reply.response,
                        requestTime: requestTime,
                        responseTime: responseTime
                    )
                else { return .notSelected }
                let updated = CachedResponse(stored: freshened, body: cached.body)
                await self.tiers.save(updated, url: key, request: request, after: run?.afterAnswering)
                return .exchanged(
                    .answered(LoadPlan.answer(updated, source: .revalidated, at: responseTime, rules: rules))
                )
            }
            if [500, 502, 503, 504].contains(status),
                rules.mayUseStaleOnError(cached.stored, for: request, at: responseTime)
            {
                _ = try? await ResponseBody(reply, to: sent, loader: self).collect()
                let stale = LoadPlan.answer(cached, source: .stale(.originError), at: responseTime, rules: rules)
                return .exchanged(.answered(stale))
            }
        }
        let stored = StoredResponse(
            request: request,
            response: reply.response,
            requestTime: requestTime,
            responseTime: responseTime,
            targetedFields: rules.targetedFields
        )
        let expected = Self.announcedLength(of: reply.response, to: sent)
        // A body announced as larger than the largest entry is not stored: refused up front.
        let isStorable =
            rules.canStore(reply.response, for: request) && (expected ?? 0) <= self.maximumEntrySize
        return .exchanged(
            .response(
                Incoming(
                    reply: reply,
                    sent: sent,
                    request: request,
                    stored: stored,
                    url: key,
                    storage: isStorable ? self.tiers.key(for: stored, url: key, request: request) : nil,
                    expectedLength: expected
                )
            )
        )
    }

    /// Sends a request whose answer is not stored, and removes what its answer makes outdated.
    func sendUncached(
        _ request: HTTPRequest,
        body: Data?,
        interim: Interim? = nil
    ) async throws -> HTTPTransportResponse {
        let reply = try await self.send(request, body: body, interim: interim)
        try Self.check(reply.response, to: request, url: request.url?.absoluteString ?? "?")
        for url in self.configuration.rules.invalidatedURLs(by: request, response: reply.response) {
            await self.tiers.invalidate(ResponseKey(self.configuration.keyTransform?(url) ?? url))
        }
        return reply
    }

    /// Throws ``LoadError/Code/invalidResponse`` for an answer to `request` that breaks HTTP:
    /// a status outside 200–599 (an interim 1xx is never a final answer), or a 304 to a request
    /// with no validators (RFC 9110 §15.4.5: only a conditional request can be answered so).
    static func check(_ response: HTTPResponse, to request: HTTPRequest, url: String) throws {
        let status = response.status.code
        guard (200...599).contains(status) else {
            throw LoadError(
                .invalidResponse,
                "The origin answered \(url) with \(status), which is not a final HTTP status."
            )
        }
        if status == 304 && !CacheRules.isConditional(request) {
            throw LoadError(
                .invalidResponse,
                "The origin answered 304 (Not Modified) to a request for \(url) that had no validators; "
                    + "nothing was stored. The origin is at fault: try again later."
            )
        }
    }

    /// The length of the body `response` to `request` announces with `Content-Length`; `nil` if
    /// it announces none that can be read. The answer to a `HEAD` request, a 204 and a 304 have
    /// no body, whatever their `Content-Length` says (RFC 9110 §6.4.1, §8.6): `nil` for them.
    static func announcedLength(of response: HTTPResponse, to request: HTTPRequest) -> Int? {
        let status = response.status.code
        guard request.method != .head, status != 204, status != 304 else { return nil }
        // One field, read in place: the fields' subscript joins the values of all of a name
        // first, through generic code that cost 4k instructions a call, and two fields (even
        // of one value) make no length.
        var length: Int?
        var count = 0
        for field in response.headerFields where field.name == .contentLength {
            count += 1
            length = Int(field.value)
        }
        guard count == 1, let length, length >= 0 else { return nil }
        return length
    }
}
