import Foundation
import HTTPTypes
import Logging
import Synchronization

/// Loads HTTP resources through memory, then disk, then the network, following HTTP's caching
/// rules (RFC 9111 and RFC 5861).
///
/// ```swift
/// let loader = try ResourceLoader(
///     transport: AsyncHTTPClientTransport(),
///     disk: DiskCache(directory: cacheDirectory)
/// )
/// let resource = try await loader.load(URL(string: "https://example.com/a.png")!)
/// print(resource.source)  // .network, then .memory
/// ```
///
/// - A fresh stored response answers at once, on the caller's task: no hop to another thread.
/// - A stale one is validated with a conditional request; a 304 freshens it. Where the response
///   allows, a stale one is served while it is revalidated in the background
///   (`stale-while-revalidate`), or when the origin fails (`stale-if-error`).
/// - Identical requests in flight share one network request. Each caller may cancel on its
///   own; the request is cancelled when its last caller goes.
/// - At most ``Configuration/maximumConnectionsPerHost`` network requests run per host; the
///   rest wait by ``Priority``.
/// - A response to an unsafe method (`POST`, `PUT`, `DELETE`…) invalidates what is stored for
///   its URL and its same-origin `Location` and `Content-Location`.
///
/// Only `GET` responses are stored. Responses with any status are answers, not errors: a 404
/// comes back as a resource with status 404. A load throws only if no whole response arrives.
public final class ResourceLoader: Sendable {
    /// The configuration the loader was made with.
    public let configuration: Configuration

    let transport: any HTTPTransport
    let store: ResponseStore
    let now: @Sendable () -> Date
    let logger: Logger
    let coalescer: Coalescer<Resource>
    /// Streamed answers that identical streamed loads share.
    let sharedResponses = SharedResponses()
    let hosts: HostLimiter
    let counters: LoaderCounters
    /// The largest body this loader stores, in bytes: ``Configuration/maximumEntrySize``, or
    /// the share of the disk or memory tier's limit that it defaults to. A larger response is
    /// answered but not stored.
    public let maximumEntrySize: Int
    /// Background revalidations in flight, by key.
    private let revalidations = Mutex<[ResponseKey: Task<Void, Never>]>([:])
    /// Bodies read from the origin for loads that share them, by their shared response.
    let pumps = Mutex<[ObjectIdentifier: Task<Void, Never>]>([:])
    /// Runs, background revalidations and disk writes not yet done.
    let pending: PendingWork
    /// Responses stored in memory, on their way to disk in the order they were stored.
    let writes: OrderedWrites
    /// Responses on their way to the shared tiers.
    let sharedWrites: SharedWrites
    /// Invalidations and purges, which reads of the shared tiers must not overlap.
    let removals = Removals()

    /// Makes a loader.
    ///
    /// - Parameters:
    ///   - configuration: Rules, policy, limits; see ``Configuration`` for the defaults.
    ///   - transport: What sends requests.
    ///   - disk: The disk tier, usually a ``DiskCache``; `nil` for none. Default: `nil`.
    ///   - shared: The tiers below the disk, shared with other machines (see
    ///     ``AsyncDataCaching``), asked in order when memory and disk have nothing to use.
    ///     Default: none.
    ///   - now: The wall clock by which responses age. Default: ``WallClock/now()``, the
    ///     system's read to the kernel's tick, as fine as HTTP's whole seconds need. Tests inject one.
    ///   - logger: Where the loader logs, at debug level. Default: nowhere.
    /// - Throws: ``CacheError`` if the configuration is invalid.
    public init(
        configuration: Configuration = Configuration(),
        transport: any HTTPTransport,
        disk: (any DataCaching)? = nil,
        shared: [any AsyncDataCaching] = [],
        now: @escaping @Sendable () -> Date = WallClock.now,
        logger: Logger = Logger(label: "cachalot", factory: { _ in SwiftLogNoOpLogHandler() })
    ) throws(CacheError) {
        try configuration.validate()
        // Without a limit given, the memory tier's default reads the system's memory.
        let memory =
            configuration.memoryCostLimit == 0
            ? nil
            : try MemoryCache<ResponseKey, StoredEntry>(configuration: .init(costLimit: configuration.memoryCostLimit))
        self.configuration = configuration
        self.transport = transport
        self.store = ResponseStore(memory: memory, disk: disk, shared: shared)
        self.now = now
        self.logger = logger
        self.counters = LoaderCounters(configuration.metrics)
        let hosts = HostLimiter(limit: configuration.maximumConnectionsPerHost)
        self.hosts = hosts
        let pending = PendingWork()
        self.pending = pending
        self.writes = OrderedWrites(counting: pending)
        self.sharedWrites = SharedWrites(counting: pending, largestBacklog: Self.largestWriteBacklog)
        self.coalescer = Coalescer(counting: pending) { run, priority in hosts.setPriority(priority, of: run) }
        let limit = (disk as? any SizedDataCaching)?.sizeLimit ?? memory?.configuration.costLimit
        self.maximumEntrySize = configuration.maximumEntrySize ?? limit.map { $0 / 20 } ?? .max
    }

    deinit {
        self.cancelBackgroundWork()
    }

    /// What the loader has done so far.
    public var statistics: Statistics {
        self.counters.snapshot
    }

    // MARK: - Loading

    /// Loads `url` with a `GET`.
    ///
    /// See ``load(_:body:policy:priority:progress:)``.
    ///
    /// - Parameters:
    ///   - url: The URL to load.
    ///   - policy: How this load uses the cache. Default: `nil`, the configuration's.
    ///   - priority: How soon it goes if it has to wait for its host. Default: `.normal`.
    ///   - progress: Told how much of the body has arrived, when it comes from the network.
    ///     Default: `nil`.
    /// - Returns: The body, the response head and where the answer came from.
    /// - Throws: as ``load(_:body:policy:priority:progress:)``.
    nonisolated(nonsending) public func load(
        _ url: URL,
        policy: CachePolicy? = nil,
        priority: Priority = .normal,
        progress: (@Sendable (LoadProgress) -> Void)? = nil
    ) async throws -> Resource {
        try await self.load(HTTPRequest(method: .get, url: url), policy: policy, priority: priority, progress: progress)
    }

    /// Answers `request` from memory, disk or the network, as the caching rules and `policy`
    /// decide.
    ///
    /// - Parameters:
    ///   - request: The request; its `Cache-Control` and `Pragma` fields count.
    ///   - body: The body to send, for methods that have one. Default: `nil`.
    ///   - policy: How this load uses the cache. Default: the configuration's.
    ///   - priority: How soon it goes if it has to wait for its host. Default: normal.
    ///   - progress: Told how much of the body has arrived, when it comes from the network.
    ///     Default: `nil`.
    /// - Returns: The body, the response head and where the answer came from.
    /// - Throws: ``LoadError`` if the request has no `http` or `https` URL, the transport failed
    ///   before a whole response arrived (and no stale response may stand in), or the body
    ///   ended early; `CancellationError` if the task was cancelled.
    nonisolated(nonsending) public func load(
        _ request: HTTPRequest,
        body: Data? = nil,
        policy: CachePolicy? = nil,
        priority: Priority = .normal,
        progress: (@Sendable (LoadProgress) -> Void)? = nil
    ) async throws -> Resource {
        // A hit is answered here, without the suspension point of a further async call.
        let step = try self.step(for: request, policy: policy)
        if case .answer(let resource) = step, !Redirect.isFollowed(resource.statusCode) { return resource }
        return try await self.complete(step, request, body: body, policy: policy, priority: priority) {
            step,
            request,
            body throws in
            try await self.perform(step, request, body: body, priority: priority, progress: progress, onWaiting: nil)
        }
    }

    /// ``load(_:body:policy:priority:progress:)``, telling `onWaiting` which run the load waits
    /// for, so that its priority can be changed (see ``Prefetch``).
    nonisolated(nonsending) func load(
        _ request: HTTPRequest,
        policy: CachePolicy? = nil,
        priority: Priority,
        onWaiting: @escaping @Sendable (_ run: String, _ caller: Int) -> Void
    ) async throws -> Resource {
        let step = try self.step(for: request, policy: policy)
        if case .answer(let resource) = step, !Redirect.isFollowed(resource.statusCode) { return resource }
        return try await self.complete(step, request, body: nil, policy: policy, priority: priority) {
            step,
            request,
            body throws in
            try await self.perform(step, request, body: body, priority: priority, progress: nil, onWaiting: onWaiting)
        }
    }

    /// Takes `step` for `request` with `perform`, then follows the redirects of its answer, up
    /// to ``Configuration/maximumRedirects``: each hop is a load of its own, answered from the
    /// cache or the network and stored by its own rules under its own URL.
    private func complete(
        _ step: Step,
        _ request: HTTPRequest,
        body: Data?,
        policy: CachePolicy?,
        priority: Priority,
        perform: (Step, HTTPRequest, Data?) async throws -> Resource
    ) async throws -> Resource {
        /// Asks the shared tiers before the network, then the network if they have nothing.
        func take(_ step: Step, _ request: HTTPRequest, _ body: Data?) async throws -> Resource {
            let step = await self.consultingSharedTiers(step, for: request, policy: policy)
            if case .answer(let answer) = step { return answer }
            return try await perform(step, request, body)
        }
        var resource = try await take(step, request, body)
        var (request, body) = (request, body)
        var redirects: [URL] = []
        while redirects.count < self.configuration.maximumRedirects,
            Redirect.isFollowed(resource.statusCode),
            let next = Redirect.request(following: resource.response, to: request, body: body),
            let url = next.request.url
        {
            redirects.append(url)
            (request, body) = next
            resource = try await take(try self.step(for: request, policy: policy), request, body)
        }
        resource.redirects = redirects
        return resource
    }

    /// Waits until the work the loader does after answering is done: writing responses to
    /// disk, background revalidations (`stale-while-revalidate`), and loads whose callers all
    /// went (a cancelled load removes its temporary file as it stops). Call it before the
    /// process exits, so that what was loaded is on disk for the next launch and nothing is
    /// left half-written.
    public func waitForBackgroundWork() async {
        await self.pending.waitUntilIdle()
    }

    /// Cancels the background work that waits on the network: revalidations
    /// (`stale-while-revalidate`), and bodies read from the origin for streamed loads that share
    /// them (their readers' bodies fail). What they were storing is not stored; disk writes of
    /// answers already given go on. A server calls it when shutdown cannot wait any longer, then
    /// ``waitForBackgroundWork()``.
    public func cancelBackgroundWork() {
        for task in self.revalidations.withLock({ Array($0.values) }) { task.cancel() }
        for task in self.pumps.withLock({ Array($0.values) }) { task.cancel() }
    }

    // MARK: - Steps

    /// What a load does next, as the stored response and the rules decide.
    enum Step {
        /// Answer with this: a stored response, or a 504 when only a stored one may answer.
        case answer(Resource)
        /// Ask the origin, validating the stored response if there is one, for `reason`.
        case exchange(ResponseKey, validating: CachedResponse?, reason: Resource.ForwardReason)
        /// Send a request whose answer is not stored.
        case uncached
        /// Only a stored response may answer, and memory and disk have none to use: the shared
        /// tiers are asked (``consultingSharedTiers(_:for:policy:)``), else a 504 answers.
        case storedOnly(ResponseKey)

        /// The step with ``storedOnly(_:)`` settled as its 504.
        var settled: Step {
            guard case .storedOnly = self else { return self }
            return .answer(Resource(body: Data(), response: HTTPResponse(status: .gatewayTimeout), source: .generated))
        }
    }

    /// Decides the load without waiting for anything, and counts it: everything but the network
    /// happens here, so that a hit never suspends.
    func step(for request: HTTPRequest, policy: CachePolicy?) throws -> Step {
        let step = try self.decide(request, policy: policy)
        self.counters.request()
        if case .answer(let resource) = step { self.counters.answer(resource.source, bytes: resource.body.count) }
        return step
    }

    /// `step` taken again with what the shared tiers hold, when it needs the network only
    /// because memory and disk had nothing to use: a response found there is promoted to the
    /// tiers above it and decided on as if it had been found in memory. The step is left as it
    /// is when the request or the policy would not use what a tier holds, or no shared tier has
    /// a response newer than the one the step validates.
    func consultingSharedTiers(_ step: Step, for request: HTTPRequest, policy: CachePolicy?) async -> Step {
        guard !self.store.shared.isEmpty else { return step.settled }
        let (key, validating): (ResponseKey, CachedResponse?)
        switch step {
        case .exchange(let exchangeKey, let validated, let reason) where reason != .request && reason != .bypass:
            (key, validating) = (exchangeKey, validated)
        case .storedOnly(let storedKey):
            (key, validating) = (storedKey, nil)
        default:
            return step
        }
        self.counters.sharedLookup()
        let epoch = self.removals.epoch
        let found = await self.store.lookupShared(key, for: request) { error in
            self.logger.debug(
                "Reading a shared tier failed; going on without it",
                metadata: ["key": "\(key.string)", "error": "\(error)"]
            )
        }
        // A response found while an invalidation or a purge ran may be what it removed.
        guard let found, self.removals.isUnchanged(since: epoch),
            validating.map({ found.response.stored.responseTime > $0.stored.responseTime }) ?? true
        else { return step.settled }
        let promotion = self.store.store(found.response, url: key, request: request, sharedTiers: 0..<found.tier)
        await self.write(promotion, key: key, run: nil)
        let step = self.decide(
            request,
            key: key,
            policy: policy ?? self.configuration.policy,
            lookup: .found(found.response, .shared(found.tier))
        ).settled
        if case .answer(let resource) = step { self.counters.answer(resource.source, bytes: resource.body.count) }
        return step
    }

    /// The step for `request`, uncounted.
    private func decide(_ request: HTTPRequest, policy: CachePolicy?, readsDisk: Bool = true) throws -> Step {
        guard let key = ResponseKey(of: request, transform: self.configuration.keyTransform) else {
            throw LoadError(.invalidRequest, "A request needs an absolute http or https URL to be loaded.")
        }
        guard request.method == .get else { return .uncached }
        let policy = policy ?? self.configuration.policy
        // A reload ignores what is stored: no need to read it (from disk, perhaps).
        let lookup = policy == .reloadIgnoringCacheData ? nil : self.lookup(key, for: request, readsDisk: readsDisk)
        return self.decide(request, key: key, policy: policy, lookup: lookup)
    }

    /// The step for `request` given what is stored for it (`nil` if it was not read, or
    /// reading it failed), uncounted.
    private func decide(
        _ request: HTTPRequest,
        key: ResponseKey,
        policy: CachePolicy,
        lookup: ResponseStore.Lookup?
    ) -> Step {
        var cached: (response: CachedResponse, tier: StorageTier)?
        if case .found(let response, let tier) = lookup { cached = (response, tier) }
        let now = self.now()
        let decision = self.configuration.rules.decision(
            for: request,
            stored: cached?.response.stored,
            at: now,
            policy: policy
        )
        let resource: Resource
        switch (decision, cached) {
        case (.useStored(.fresh), let cached?):
            let source: Resource.Source =
                switch cached.tier {
                case .memory: .memory
                case .disk: .disk
                case .shared: .shared
                }
            resource = self.answer(cached.response, source: source, at: now)
        case (.useStored(.stale(let reason)), let cached?):
            resource = self.answer(cached.response, source: .stale(reason), at: now)
        case (.useStoredAndRevalidate, let cached?):
            self.revalidateInBackground(request, key: key, cached: cached.response)
            resource = self.answer(cached.response, source: .stale(.whileRevalidating), at: now)
        case (.unavailable, _):
            let step = Step.storedOnly(key)
            return self.store.shared.isEmpty ? step.settled : step
        default:  // .validate or .fetch (the rules use a stored response only if there is one)
            let reason: Resource.ForwardReason
            switch lookup {
            case .found(let response, _)?:
                let stored = response.stored
                let isFresh =
                    stored.freshnessLifetime(isShared: self.configuration.rules.isShared) > stored.age(at: now)
                reason = isFresh && !stored.cacheControl.isNoCache ? .request : .stale
            case .absent?: reason = .uriMiss
            case .otherVariants?: reason = .varyMiss
            case nil: reason = policy == .reloadIgnoringCacheData ? .bypass : .miss
            }
            return .exchange(key, validating: decision == .validate ? cached?.response : nil, reason: reason)
        }
        return .answer(resource)
    }

    /// The answer the cache gives `request` at once, without waiting on anything: a fresh
    /// stored response, a stale one that the rules or `policy` allow (starting its background
    /// revalidation if `stale-while-revalidate` asks for one), or the 504 of
    /// ``CachePolicy/returnCacheDataDontLoad`` (with no shared tier to ask first). `nil` when the
    /// answer needs the network or a shared tier (or is a redirect to follow): then
    /// ``load(_:body:policy:priority:progress:)`` or
    /// ``stream(_:body:policy:priority:interim:)`` the request, which looks it up again.
    ///
    /// For a server that answers hits on the thread that read the request, without a hop to
    /// another executor. It reads the disk tier unless `readsDisk` is `false`: a disk read may
    /// wait for another process's lock, or write the journal, which a thread that must never
    /// wait (an event loop) leaves to another. It is counted in ``statistics`` only when it
    /// answers.
    ///
    /// - Parameters:
    ///   - request: The request; its `Cache-Control` and `Pragma` fields count.
    ///   - policy: How the request uses the cache. Default: `nil`, the configuration's.
    ///   - largestBody: The largest body answered: `nil` for a larger one, which the caller may
    ///     rather stream. Default: no limit.
    ///   - readsDisk: Whether an entry not in memory is looked for on disk; if not, `nil`
    ///     answers it. Default: `true`.
    /// - Throws: ``LoadError`` with ``LoadError/Code/invalidRequest`` if the request has no
    ///   `http` or `https` URL.
    public func cachedAnswer(
        to request: HTTPRequest,
        policy: CachePolicy? = nil,
        largestBody: Int = .max,
        readsDisk: Bool = true
    ) throws -> Resource? {
        guard case .answer(let resource) = try self.decide(request, policy: policy, readsDisk: readsDisk),
            resource.body.count <= largestBody,
            self.configuration.maximumRedirects == 0 || !Redirect.isFollowed(resource.statusCode)
        else { return nil }
        self.counters.request()
        self.counters.answer(resource.source, bytes: resource.body.count)
        return resource
    }

    /// Takes a step that needs the network: joins the coalesced run of identical requests, or
    /// sends an uncached one.
    private func perform(
        _ step: Step,
        _ request: HTTPRequest,
        body: Data?,
        priority: Priority,
        progress: (@Sendable (LoadProgress) -> Void)?,
        onWaiting: (@Sendable (_ run: String, _ caller: Int) -> Void)?
    ) async throws -> Resource {
        let key: ResponseKey
        let validated: CachedResponse?
        let reason: Resource.ForwardReason
        switch step {
        case .answer(let resource):
            return resource
        case .storedOnly:
            return try await self.perform(
                step.settled,
                request,
                body: body,
                priority: priority,
                progress: progress,
                onWaiting: onWaiting
            )
        case .uncached:
            var resource = try await self.exchangeUncached(request, body: body, priority: priority)
            resource.forwardReason = .method
            return resource
        case .exchange(let exchangeKey, let validating, let forwardReason):
            (key, validated, reason) = (exchangeKey, validating, forwardReason)
        }
        let flightKey = Self.flightKey(key, request, validating: validated != nil)
        var reportWaiting: (@Sendable (Int) -> Void)?
        if let onWaiting {
            reportWaiting = { @Sendable caller in onWaiting(flightKey, caller) }
        }
        var resource = try await self.coalescer.run(
            flightKey,
            priority: priority.rawValue,
            progress: progress,
            onWaiting: reportWaiting
        ) { run in
            try await self.exchange(request, key: key, validating: validated, run: run)
        }
        resource.forwardReason = reason
        self.counters.answer(resource.source, bytes: resource.body.count)
        return resource
    }

    /// What is stored for `request`; `nil` if reading the cache failed.
    private func lookup(_ key: ResponseKey, for request: HTTPRequest, readsDisk: Bool = true) -> ResponseStore.Lookup? {
        do {
            return try self.store.lookup(key, for: request, readsDisk: readsDisk)
        } catch {
            self.logger.debug(
                "Reading the cache failed; loading instead",
                metadata: ["key": "\(key.string)", "error": "\(error)"]
            )
            return nil
        }
    }

    /// A stored response as an answer at `now`, with its current `Age`. The caller counts it.
    private func answer(_ cached: CachedResponse, source: Resource.Source, at now: Date) -> Resource {
        let largest = TimeInterval(CacheControl.largestDeltaSeconds)
        let age = min(max(0, cached.stored.age(at: now)), largest)
        let lifetime = cached.stored.freshnessLifetime(isShared: self.configuration.rules.isShared)
        let timeToLive = min(max(-largest, lifetime - age), largest)
        return Resource(
            body: cached.body,
            stored: cached.stored,
            age: Int(age),
            timeToLive: Int(timeToLive),
            source: source
        )
    }

    /// Sends `request` (conditionally, if `validating` a stored response) when its host has a
    /// free slot, reads the answer, and stores it if the rules allow.
    private func exchange(
        _ request: HTTPRequest,
        key: ResponseKey,
        validating cached: CachedResponse?,
        run: Coalescer<Resource>.Run
    ) async throws -> Resource {
        let host = request.authority ?? ""
        try await self.hosts.acquire(host, ticket: run.id, priority: run.priority)
        defer { self.hosts.release(host) }
        var validating = cached
        while true {
            if let resource = try await self.send(request, key: key, validating: validating, run: run) {
                return resource
            }
            // A 304 about another representation than the stored one: ask without validators.
            validating = nil
        }
    }

    /// One request and its answer; `nil` for a 304 that does not select the validated response.
    private func send(
        _ request: HTTPRequest,
        key: ResponseKey,
        validating cached: CachedResponse?,
        run: Coalescer<Resource>.Run
    ) async throws -> Resource? {
        switch try await self.exchangeHead(request, key: key, validating: cached, run: run) {
        case .answered(let resource):
            return resource
        case .notSelected:
            return nil
        case .response(let incoming):
            return try await self.readWhole(incoming, run: run)
        }
    }

    /// What the origin's answer to one request came to, its body not yet read.
    enum Exchanged: Sendable {
        /// An answer made from the stored response: freshened by a 304, or stale for an origin
        /// error.
        case answered(Resource)
        /// A 304 about another representation than the stored one.
        case notSelected
        /// A response to answer with, its body still to be read.
        case response(Incoming)
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

    /// What receives the interim responses (1xx) of a load: a proxy relays them to its client.
    public typealias Interim = @Sendable (HTTPResponse) async -> Void

    /// Sends `request` through the transport, with `interim` if there is one.
    private func send(_ request: HTTPRequest, body: Data?, interim: Interim?) async throws -> HTTPTransportResponse {
        guard let interim else { return try await self.transport.send(request, body: body) }
        return try await self.transport.send(request, body: body, interim: interim)
    }

    /// Sends `request` (conditionally, if `validating` a stored response) and reads the answer's
    /// head: a 304 or an origin error that a stored response answers is settled here.
    func exchangeHead(
        _ request: HTTPRequest,
        key: ResponseKey,
        validating cached: CachedResponse?,
        run: Coalescer<Resource>.Run?,
        interim: Interim? = nil
    ) async throws -> Exchanged {
        let rules = self.configuration.rules
        let sent = cached.map { rules.conditionalRequest(for: request, stored: $0.stored) } ?? request
        let requestTime = self.now()
        let reply: HTTPTransportResponse
        do {
            reply = try await self.send(sent, body: nil, interim: interim)
        } catch let error as LoadError where error.code == .invalidRequest {
            throw error
        } catch {
            try Task.checkCancellation()
            let now = self.now()
            if let cached, rules.mayUseStaleWhenUnreachable(cached.stored, for: request, at: now) {
                self.logger.debug(
                    "The origin failed; answering stale",
                    metadata: ["key": "\(key.string)", "error": "\(error)"]
                )
                let allowed = rules.mayUseStaleOnError(cached.stored, for: request, at: now)
                return .answered(self.answer(cached, source: .stale(allowed ? .originError : .unreachable), at: now))
            }
            throw LoadError(.transport, "The request to \(key.string) failed: \(error)", underlying: error)
        }
        let responseTime = self.now()
        let status = reply.response.status.code
        try Self.check(reply.response, to: sent, url: key.string)
        if let cached {
            self.counters.validation(notModified: status == 304)
            if status == 304 {
                _ = try await self.readBody(reply, to: sent, run: run).body
                guard
                    let freshened = rules.freshened(
                        cached.stored,
                        with: reply.response,
                        requestTime: requestTime,
                        responseTime: responseTime
                    )
                else { return .notSelected }
                let updated = CachedResponse(stored: freshened, body: cached.body)
                await self.save(updated, key: key, request: request, run: run)
                return .answered(self.answer(updated, source: .revalidated, at: responseTime))
            }
            if [500, 502, 503, 504].contains(status),
                rules.mayUseStaleOnError(cached.stored, for: request, at: responseTime)
            {
                _ = try? await self.readBody(reply, to: sent, run: run).body
                return .answered(self.answer(cached, source: .stale(.originError), at: responseTime))
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
        return .response(
            Incoming(
                reply: reply,
                sent: sent,
                request: request,
                stored: stored,
                url: key,
                storage: isStorable ? self.store.key(for: stored, url: key, request: request) : nil,
                expectedLength: expected
            )
        )
    }

    /// Reads the whole body of `incoming` and stores the response if it may be and fits.
    private func readWhole(_ incoming: Incoming, run: Coalescer<Resource>.Run) async throws -> Resource {
        let storage = incoming.storage
        let (body, writer) = try await self.readBody(incoming.reply, to: incoming.sent, run: run) {
            () throws(CacheError) in
            // A large body goes to a file as it arrives: under its key if it may be stored,
            // else under a name of its own, to be discarded once mapped.
            try (self.store.disk as? any StreamingDataCaching)?.makeEntryWriter(
                forKey: storage?.key.string ?? "unstored \(UUID())",
                metadata: incoming.stored.encoded()
            )
        }
        let fits = storage != nil && body.count <= self.maximumEntrySize
        if let writer {
            if let storage, fits {
                self.commit(writer, variants: storage.names, url: incoming.url)
            } else {
                writer.discard()
            }
        } else if fits {
            let response = CachedResponse(stored: incoming.stored, body: body)
            await self.save(response, key: incoming.url, request: incoming.request, run: run)
        }
        return Resource(body: body, response: incoming.reply.response, source: .network)
    }

    /// Makes a large body written as it arrived into the stored entry.
    func commit(_ writer: any DataCacheWriting, variants names: [String], url: ResponseKey) {
        do {
            try writer.commit()
            if !names.isEmpty { try self.store.storeVariants(names, url: url) }
        } catch {
            self.counters.storageFailure()
            self.logger.debug(
                "Storing a large response failed",
                metadata: ["key": "\(url.string)", "error": "\(error)"]
            )
        }
    }

    /// Sends a request whose answer is not stored (any method but `GET`), and invalidates what
    /// its answer makes outdated.
    private func exchangeUncached(_ request: HTTPRequest, body: Data?, priority: Priority) async throws -> Resource {
        let host = request.authority ?? ""
        let ticket = -1 - Int.random(in: 0..<Int.max)
        try await self.hosts.acquire(host, ticket: ticket, priority: priority.rawValue)
        defer { self.hosts.release(host) }
        let reply = try await self.sendUncached(request, body: body)
        let received = try await self.readBody(reply, to: request, run: nil).body
        let resource = Resource(body: received, response: reply.response, source: .network)
        self.counters.answer(.network, bytes: received.count)
        return resource
    }

    /// Sends a request whose answer is not stored, and removes what its answer makes outdated.
    func sendUncached(
        _ request: HTTPRequest,
        body: Data?,
        interim: Interim? = nil
    ) async throws -> HTTPTransportResponse {
        let reply: HTTPTransportResponse
        do {
            reply = try await self.send(request, body: body, interim: interim)
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
        try Self.check(reply.response, to: request, url: request.url?.absoluteString ?? "?")
        for url in self.configuration.rules.invalidatedURLs(by: request, response: reply.response) {
            await self.invalidate(ResponseKey(self.configuration.keyTransform?(url) ?? url))
        }
        return reply
    }

    /// Removes what is stored under `key` from every tier, after the writes to them queued
    /// before (so that none of them brings it back later), and returns once it is gone: the
    /// next load here cannot find what the invalidation made outdated. The shared tiers go
    /// first, so that a load meanwhile cannot bring back from them what memory and disk no
    /// longer hold.
    func invalidate(_ key: ResponseKey) async {
        let logger = self.logger
        @Sendable func failed(_ error: CacheError) {
            logger.debug("Invalidating failed", metadata: ["key": "\(key.string)", "error": "\(error)"])
        }
        await self.removals.run { () async in
            if !self.store.shared.isEmpty {
                await self.sharedWrites.waitForWrites(to: key.string)
                do throws(CacheError) { try await self.store.removeShared(key) } catch { failed(error) }
            }
            self.store.removeFromMemory(key)
            let ticket = self.writes.enqueue(bytes: 0) { [store] in
                do throws(CacheError) { try store.removeFromDisk(key) } catch { failed(error) }
            }
            self.writes.drain()
            await self.writes.wait(untilMade: ticket)
        }
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
        return response.headerFields[.contentLength].flatMap { Int($0) }.flatMap { $0 >= 0 ? $0 : nil }
    }

    /// Reads the whole body, reporting progress; throws if it ends before its `Content-Length`.
    ///
    /// A body larger than ``Configuration/streamingThreshold`` goes to the writer that
    /// `makeWriter` makes (if it makes one) as it arrives, and comes back mapped from its file,
    /// with the writer, for the caller to commit or discard. If the disk tier fails (a full
    /// disk), the body goes on in memory and the failure is counted: the answer stands.
    private func readBody(
        _ reply: HTTPTransportResponse,
        to request: HTTPRequest,
        run: Coalescer<Resource>.Run?,
        spoolingTo makeWriter: (() throws(CacheError) -> (any DataCacheWriting)?)? = nil
    ) async throws -> (body: Data, writer: (any DataCacheWriting)?) {
        let expected = Self.announcedLength(of: reply.response, to: request)
        let threshold = self.configuration.streamingThreshold
        var body = Data()
        var writer: (any DataCacheWriting)?
        var makeWriter = makeWriter
        var received = 0
        /// The disk tier failed: the body goes on in memory, with what reached the file.
        func keepInMemory(after error: CacheError) {
            if let written = try? writer?.mappedBody() { body = Data(written) + body }
            writer?.discard()
            (writer, makeWriter) = (nil, nil)
            self.counters.storageFailure()
            self.logger.debug("Spooling a body failed; reading it into memory", metadata: ["error": "\(error)"])
        }
        do {
            do throws(CacheError) {
                if let makeWriter, let expected, expected > threshold { writer = try makeWriter() }
            } catch {
                keepInMemory(after: error)
            }
            if writer == nil, let expected, expected > 0 { body.reserveCapacity(min(expected, threshold)) }
            for try await piece in reply.body {
                received += piece.count
                do throws(CacheError) {
                    if let writer {
                        try writer.append(piece)
                    } else {
                        body.append(piece)
                        if let makeWriter, body.count > threshold, let spool = try makeWriter() {
                            writer = spool
                            try spool.append(body)
                            body = Data()
                        }
                    }
                } catch {
                    keepInMemory(after: error)
                    if body.count < received { body.append(piece) }
                }
                self.counters.received(piece.count)
                run?.report(LoadProgress(received: received, expected: expected))
            }
            if let expected, received < expected {
                throw LoadError(
                    .incompleteBody,
                    "The body ended after \(received) of the \(expected) bytes its Content-Length announced."
                )
            }
            if let writer { return (try writer.mappedBody(), writer) }
            return (body, nil)
        } catch let error as LoadError {
            writer?.discard()
            throw error
        } catch let error as CacheError {
            writer?.discard()
            throw LoadError(.storage, "Mapping the body from the disk tier failed: \(error)", underlying: error)
        } catch {
            writer?.discard()
            try Task.checkCancellation()
            throw LoadError(.transport, "The body broke off after \(received) bytes: \(error)", underlying: error)
        }
    }

    /// Stores `response` in memory now, and in the other tiers later (see
    /// ``write(_:key:run:)``).
    func save(
        _ response: CachedResponse,
        key: ResponseKey,
        request: HTTPRequest,
        run: Coalescer<Resource>.Run?
    ) async {
        await self.write(self.store.store(response, url: key, request: request), key: key, run: run)
    }

    /// Makes `later`, the writes that follow memory's: on disk once the run's callers have
    /// their answer (or, without a run, from a task of lower priority), so that a miss does not
    /// wait for the disk, unless the disk is ``largestWriteBacklog`` behind (then the caller
    /// makes the writes, or waits, so that the queue, held in memory, stays bounded) or there is
    /// no memory tier (then the response is on disk before the caller goes on, so that the next
    /// load finds it); in the shared tiers from a task of their own, never waited for. Disk
    /// writes are made in the order of this call.
    func write(_ later: ResponseStore.Writes, key: ResponseKey, run: Coalescer<Resource>.Run?) async {
        let ticket = self.writes.enqueue(bytes: later.bytes) { [logger, counters] in
            do {
                try later.disk()
            } catch {
                counters.storageFailure()
                logger.debug("Storing a response failed", metadata: ["key": "\(key.string)", "error": "\(error)"])
            }
        }
        if let shared = later.shared {
            let isStarted = self.sharedWrites.enqueue(key: key.string, bytes: later.bytes) {
                [logger, counters] () async in
                do throws(CacheError) { try await shared() } catch {
                    counters.sharedStorageFailure()
                    logger.debug(
                        "Storing a response in a shared tier failed",
                        metadata: ["key": "\(key.string)", "error": "\(error)"]
                    )
                }
            }
            if !isStarted { self.counters.sharedStorageFailure() }
        }
        if self.store.memory == nil {
            self.writes.drain()
            await self.writes.wait(untilMade: ticket)
        } else if ticket.backlog > Self.largestWriteBacklog {
            self.writes.drain()
            await self.writes.wait(untilBacklogIsAtMost: Self.largestWriteBacklog)
        } else if let run {
            run.afterAnswering.add { [writes] in writes.drain() }
        } else {
            Task(priority: .background) { [writes] in writes.drain() }
        }
    }

    /// The bytes of bodies waiting for the disk beyond which a miss waits for the disk.
    static let largestWriteBacklog = 64 << 20

    /// Starts revalidating `cached` unless a background revalidation of `key` is running.
    private func revalidateInBackground(_ request: HTTPRequest, key: ResponseKey, cached: CachedResponse) {
        self.revalidations.withLock { revalidations in
            guard revalidations[key] == nil else { return }
            self.pending.begin()
            revalidations[key] = Task { [weak self, pending] in
                defer { pending.end() }
                guard let self else { return }
                _ = try? await self.coalescer.run(
                    Self.flightKey(key, request, validating: true),
                    priority: Priority.low.rawValue,
                    progress: nil
                ) { run in
                    try await self.exchange(request, key: key, validating: cached, run: run)
                }
                _ = self.revalidations.withLock { $0.removeValue(forKey: key) }
            }
        }
    }

    /// Requests are identical when their keys, fields and kind of exchange are.
    private static func flightKey(_ key: ResponseKey, _ request: HTTPRequest, validating: Bool) -> String {
        var flight = validating ? "validate " : "fetch "
        flight += key.string
        for field in request.headerFields {
            flight += "\n\(field.name.canonicalName): \(field.value)"
        }
        return flight
    }
}
