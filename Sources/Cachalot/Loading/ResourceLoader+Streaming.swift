import Foundation
import HTTPTypes
import Logging
import Synchronization

/// A loaded resource whose body is read as it arrives: for bodies of any size, or of no known
/// end, which ``ResourceLoader/stream(_:body:policy:priority:interim:)`` never holds whole.
public struct ResourceStream: Sendable {
    /// The status and header fields. An answer from the cache carries `Age`.
    public var response: HTTPResponse
    /// Where the answer came from.
    public var source: Resource.Source
    /// The URLs of the redirects the load followed, in order; see ``Resource/redirects``.
    public var redirects: [URL] = []
    /// The body, in pieces. An answer from the cache is one piece (mapped from its file when
    /// large). An answer from the network is read from the connection as it is iterated, once.
    public var body: HTTPBody
    /// The body's length when it is known before it is read: always for an answer from the
    /// cache, and for one from the network that announced its `Content-Length`. `nil` for an
    /// answer that has no body (to `HEAD`, a 204, a 304) or whose length is unknown.
    public var length: Int?
    /// Why the request went to the origin; `nil` when it did not. See ``Resource/forwardReason``.
    public var forwardReason: Resource.ForwardReason?
    /// How many more seconds a stored answer stays fresh; `nil` for an answer that was not
    /// stored. See ``Resource/timeToLive``.
    public var timeToLive: Int?
    /// Whether a response from the network is being stored as it passes: it will be, once it
    /// has been read whole, unless it outgrows the largest entry or the disk tier fails.
    public var isStoring = false
    /// Whether this load joined an identical one already on its way to the origin, and reads
    /// the answer that one brings instead of sending a request of its own.
    public var isCollapsed = false

    /// A stream of a whole resource: its body in one piece.
    public init(_ resource: Resource) {
        self.response = resource.response
        self.source = resource.source
        self.redirects = resource.redirects
        self.body = HTTPBody(resource.body.isEmpty ? [] : [resource.body])
        self.length = resource.body.count
        self.forwardReason = resource.forwardReason
        self.timeToLive = resource.timeToLive
    }

    init(response: HTTPResponse, source: Resource.Source, body: HTTPBody, length: Int?) {
        self.response = response
        self.source = source
        self.body = body
        self.length = length
    }
}

extension ResourceLoader {
    /// Answers `request` as ``load(_:body:policy:priority:progress:)`` does, but hands the body
    /// over in pieces as they arrive instead of whole, so that no body, however large or
    /// endless, is held in memory or spooled to disk for the caller.
    ///
    /// A body from the network is stored as it passes (in memory up to
    /// ``Configuration/streamingThreshold``, then in a file of the ``DiskCache``) only while
    /// it may be: if the rules forbid storing it, its `Content-Length` is over the largest
    /// entry stored, or it grows past that size, or the disk tier fails, storing stops at once
    /// (a failure is counted in ``Statistics/storageFailures``) and the body goes on to the
    /// caller. It is stored when its last piece has been read and it is whole.
    ///
    /// Identical streamed requests for a URL share one request to the origin (collapsed
    /// forwarding): those that arrive before its answer is whole read it from its start as it
    /// arrives, if it is being stored, has a `Content-Length` and matches their `Vary`-named
    /// fields; otherwise they send their own. A shared body is read from the origin at its own
    /// pace, whatever its readers' pace; once it is written to the disk tier as it arrives (past
    /// ``Configuration/streamingThreshold``), at most 2 MiB of it is held in memory, and a reader
    /// that falls behind reads from the file. A request holds its place among
    /// ``Configuration/maximumConnectionsPerHost`` only until its head arrives.
    ///
    /// - Parameters:
    ///   - request: The request; its `Cache-Control` and `Pragma` fields count.
    ///   - body: The body to send, for methods that have one. Default: `nil`.
    ///   - policy: How this load uses the cache. Default: `nil`, the configuration's.
    ///   - priority: How soon it goes if it has to wait for its host. Default: `.normal`.
    ///   - interim: Receives the interim responses (1xx, such as 103 Early Hints) of the
    ///     request this load sends, as they arrive, if the transport reports them; a load that
    ///     another identical one answers gets none. Default: `nil`.
    /// - Returns: The response head, where it came from, and the body to read.
    /// - Throws: ``LoadError`` as `load` does, before the head; reading the body throws
    ///   ``LoadError`` if it breaks off or ends before its `Content-Length`.
    public func stream(
        _ request: HTTPRequest,
        body: Data? = nil,
        policy: CachePolicy? = nil,
        priority: Priority = .normal,
        interim: Interim? = nil
    ) async throws -> ResourceStream {
        var (request, body) = (request, body)
        var redirects: [URL] = []
        while true {
            var answer = try await self.streamOne(
                request,
                body: body,
                policy: policy,
                priority: priority,
                interim: interim
            )
            guard redirects.count < self.configuration.maximumRedirects,
                Redirect.isFollowed(answer.response.status.code),
                let next = Redirect.request(following: answer.response, to: request, body: body),
                let url = next.request.url
            else {
                answer.redirects = redirects
                return answer
            }
            // The redirect's own body is read (and so stored, if it may be), up to a bound.
            var count = 0
            for try await piece in answer.body {
                count += piece.count
                guard count <= Self.largestRedirectBody else {
                    throw LoadError(
                        .invalidResponse,
                        "The redirect from \(request.url?.absoluteString ?? "?") has a body of more than "
                            + "\(Self.largestRedirectBody) bytes; it was not followed."
                    )
                }
            }
            redirects.append(url)
            (request, body) = next
        }
    }

    /// The largest body of a redirect that a streamed load reads to follow it.
    static let largestRedirectBody = 1 << 20

    private func streamOne(
        _ request: HTTPRequest,
        body: Data?,
        policy: CachePolicy?,
        priority: Priority,
        interim: Interim?
    ) async throws -> ResourceStream {
        var step = try self.step(for: request, policy: policy)
        if case .answer(let resource) = step { return ResourceStream(resource) }
        step = await self.consultingSharedTiers(step, for: request, policy: policy).settled
        if case .answer(let resource) = step { return ResourceStream(resource) }
        guard case .exchange(let key, let validating, let reason) = step else {
            return try await self.withHostSlot(of: request, priority: priority) {
                let reply = try await self.sendUncached(request, body: body, interim: interim)
                self.counters.answer(.network, bytes: 0)
                var stream = ResourceStream(
                    response: reply.response,
                    source: .network,
                    body: HTTPBody(StoringBody(loader: self, reply: reply, request: request, incoming: nil)) { $0 },
                    length: Self.announcedLength(of: reply.response, to: request)
                )
                stream.forwardReason = .method
                return stream
            }
        }
        // Identical loads of a URL share one request; `Vary` is checked once the head is here.
        let flight = (validating == nil ? "fetch " : "validate ") + key.string
        let (shared, isLeader) = self.sharedResponses.join(flight)
        if !isLeader, var stream = try await self.follow(shared, request: request) {
            stream.forwardReason = reason
            return stream
        }
        do {
            var stream = try await self.withHostSlot(of: request, priority: priority) {
                try await self.exchangeStream(
                    request,
                    key: key,
                    validating: validating,
                    sharing: isLeader ? (shared, flight) : nil,
                    interim: interim
                )
            }
            stream.forwardReason = reason
            return stream
        } catch {
            if isLeader {
                shared.publish(error is CancellationError ? .unshared : .failed(error))
                self.sharedResponses.end(flight, shared)
            }
            throw error
        }
    }

    /// Runs `body` holding one of the request's host's slots (see
    /// ``Configuration/maximumConnectionsPerHost``).
    private func withHostSlot<Result>(
        of request: HTTPRequest,
        priority: Priority,
        _ body: () async throws -> Result
    ) async throws -> Result {
        let host = request.authority ?? ""
        try await self.hosts.acquire(host, ticket: -1 - Int.random(in: 0..<Int.max), priority: priority.rawValue)
        defer { self.hosts.release(host) }
        return try await body()
    }

    /// Sends `request` (conditionally, if `validating`) and returns the answer as a stream. With
    /// `sharing`, it publishes the head there, a response that can be shared is read into it (see
    /// ``pumpShared(_:from:flight:)``) and from it, and the flight ends once nothing more will be
    /// shared.
    private func exchangeStream(
        _ request: HTTPRequest,
        key: ResponseKey,
        validating: CachedResponse?,
        sharing: (response: SharedResponse, flight: String)?,
        interim: Interim?
    ) async throws -> ResourceStream {
        func unshared() {
            guard let sharing else { return }
            sharing.response.publish(.unshared)
            self.sharedResponses.end(sharing.flight, sharing.response)
        }
        var validating = validating
        while true {
            switch try await self.exchangeHead(request, key: key, validating: validating, run: nil, interim: interim) {
            case .answered(let resource):
                self.counters.answer(resource.source, bytes: resource.body.count)
                if let sharing {
                    sharing.response.publish(.whole(resource))
                    self.sharedResponses.end(sharing.flight, sharing.response)
                }
                return ResourceStream(resource)
            case .notSelected:
                validating = nil
            case .response(let incoming):
                self.counters.answer(.network, bytes: 0)
                var stream = ResourceStream(
                    response: incoming.reply.response,
                    source: .network,
                    body: HTTPBody(
                        StoringBody(
                            loader: self,
                            reply: incoming.reply,
                            request: incoming.sent,
                            incoming: incoming,
                            shared: sharing?.response
                        )
                    ) { $0 },
                    length: incoming.expectedLength
                )
                stream.isStoring = incoming.storage != nil
                guard let sharing else { return stream }
                // Shared only if it is stored and bounded (the body is held for the readers), and
                // fresh: the loads that wait could use it stored without validating it.
                let stored = incoming.stored
                let isFresh =
                    stored.freshnessLifetime(isShared: self.configuration.rules.isShared) > stored.age(at: self.now())
                    && !stored.cacheControl.isNoCache
                guard stream.isStoring, isFresh, let length = incoming.expectedLength else {
                    unshared()
                    return stream
                }
                sharing.response.publish(.shared(stream.response, incoming.stored, length: length))
                self.pumpShared(sharing.response, from: stream.body, flight: sharing.flight)
                stream.body = sharing.response.body
                return stream
            }
        }
    }

    /// Reads `body` from the origin into `shared` at the origin's pace (storing it on the way),
    /// and takes the flight out at the end. It runs as background work (see
    /// ``waitForBackgroundWork()``), whether or not any reader is left.
    private func pumpShared(_ shared: SharedResponse, from body: HTTPBody, flight: String) {
        self.pending.begin()
        // The shared response lives as long as its pump: its identity names the pump.
        let id = ObjectIdentifier(shared)
        // Made under the lock, which its own removal takes: it cannot be removed before it is added.
        self.pumps.withLock { pumps in
            pumps[id] = Task { [pending, sharedResponses, weak self] in
                defer { pending.end() }
                do {
                    for try await piece in body { shared.append(piece) }
                    shared.finish(.success(()))
                } catch {
                    shared.finish(.failure(error))
                }
                sharedResponses.end(flight, shared)
                _ = self?.pumps.withLock { $0.removeValue(forKey: id) }
            }
        }
    }

    /// The answer a load that followed `shared` reads, or `nil` if it must send its own request:
    /// nothing was shared, the leader was cancelled, or the response varies on a field whose value
    /// differs in `request`.
    ///
    /// - Throws: The leader's error, if its request failed.
    private func follow(_ shared: SharedResponse, request: HTTPRequest) async throws -> ResourceStream? {
        switch await shared.head() {
        case .whole(let resource):
            self.counters.answer(resource.source, bytes: resource.body.count)
            var stream = ResourceStream(resource)
            stream.isCollapsed = true
            return stream
        case .shared(let response, let stored, let length) where stored.matches(request):
            self.counters.answer(.network, bytes: 0)
            var stream = ResourceStream(response: response, source: .network, body: shared.body, length: length)
            stream.isStoring = true
            stream.isCollapsed = true
            return stream
        case .failed(let error):
            throw error
        case .shared, .unshared:
            return nil
        }
    }
}

/// A body from the network as the caller reads it, stored on the way while it may be.
private struct StoringBody: AsyncSequence, Sendable {
    let loader: ResourceLoader
    let reply: HTTPTransportResponse
    /// The request as sent, for its method.
    let request: HTTPRequest
    /// What storing the response takes; `nil` for an answer never stored.
    let incoming: ResourceLoader.Incoming?
    /// The response this body is shared through, if any: told of the file the body is written
    /// to, so that readers who fall behind read from it.
    var shared: SharedResponse? = nil

    func makeAsyncIterator() -> Iterator {
        Iterator(
            body: self,
            pieces: self.reply.body.makeAsyncIterator(),
            expected: ResourceLoader.announcedLength(of: self.reply.response, to: self.request),
            isStoring: self.incoming?.storage != nil
        )
    }

    struct Iterator: AsyncIteratorProtocol {
        let body: StoringBody
        var pieces: HTTPBody.AsyncIterator
        let expected: Int?
        var isStoring: Bool
        var received = 0
        /// The body so far while it is small enough for memory.
        var held = Data()
        /// The file it goes to once it is not.
        var writer: (any DataCacheWriting)?
        /// The bytes in the writer's file.
        var spooled = 0
        var isFinished = false

        mutating func next() async throws -> Data? {
            guard !self.isFinished else { return nil }
            let piece: Data?
            do {
                piece = try await self.pieces.next()
            } catch {
                self.stopStoring()
                self.isFinished = true
                try Task.checkCancellation()
                throw LoadError(
                    .transport,
                    "The body broke off after \(self.received) bytes: \(error)",
                    underlying: error
                )
            }
            guard let piece else {
                self.isFinished = true
                try await self.finish()
                return nil
            }
            self.received += piece.count
            self.body.loader.counters.received(piece.count)
            if self.isStoring { self.keep(piece) }
            return piece
        }

        /// Adds `piece` to what is stored, or stops storing if the body has outgrown the
        /// largest entry or the disk tier fails.
        private mutating func keep(_ piece: Data) {
            let loader = self.body.loader
            guard self.received <= loader.maximumEntrySize, let incoming = self.body.incoming,
                let storage = incoming.storage
            else {
                self.stopStoring()
                return
            }
            do throws(CacheError) {
                if let writer = self.writer {
                    try writer.append(piece)
                    self.spooled = self.received
                    return
                }
                self.held.append(piece)
                guard self.held.count > loader.configuration.streamingThreshold,
                    let disk = loader.store.disk as? any StreamingDataCaching
                else { return }
                let writer = try disk.makeEntryWriter(forKey: storage.key.string, metadata: incoming.stored.encoded())
                try writer.append(self.held)
                self.writer = writer
                self.spooled = self.received
                self.held = Data()
                if let shared = self.body.shared, let spool = (writer as? any BodySpooling)?.spool() {
                    shared.spool(spool)
                }
            } catch {
                loader.counters.storageFailure()
                loader.logger.debug(
                    "Storing a streamed response failed; the body goes on to the caller",
                    metadata: ["key": "\(storage.key.string)", "error": "\(error)"]
                )
                self.stopStoring()
            }
        }

        private mutating func stopStoring() {
            if self.writer != nil { self.body.shared?.spoolStopped(at: self.spooled) }
            self.writer?.discard()
            self.writer = nil
            self.held = Data()
            self.isStoring = false
        }

        /// At the end of the body: throws if it is short of its `Content-Length`, else stores
        /// it if it was being stored.
        private mutating func finish() async throws {
            if let expected = self.expected, self.received < expected {
                self.stopStoring()
                throw LoadError(
                    .incompleteBody,
                    "The body ended after \(self.received) of the \(expected) bytes its Content-Length announced."
                )
            }
            guard self.isStoring, let incoming = self.body.incoming, let storage = incoming.storage else { return }
            let loader = self.body.loader
            if let writer = self.writer {
                loader.commit(writer, variants: storage.names, url: incoming.url)
                self.writer = nil
            } else {
                let response = CachedResponse(stored: incoming.stored, body: self.held)
                await loader.save(response, key: incoming.url, request: incoming.request, run: nil)
            }
            self.held = Data()
        }
    }
}
