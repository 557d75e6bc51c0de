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
    /// Memory, disk and the shared tiers, as one chain.
    let tiers: TierChain
    let now: @Sendable () -> Date
    let logger: Logger
    /// Requests to the origin in flight, shared by identical loads.
    let flights: Flights<FlightKey, FlightAnswer>
    /// The bytes of bodies from the network held in memory (see
    /// ``Configuration/inFlightBodyLimit``).
    let bodies: ByteBudget
    let hosts: HostLimiter
    let counters: LoaderCounters
    /// The largest body this loader stores, in bytes: ``Configuration/maximumEntrySize``, or
    /// the share of the disk or memory tier's limit that it defaults to. A larger response is
    /// answered but not stored.
    public let maximumEntrySize: Int
    /// Flights, background revalidations and disk writes not yet done.
    let pending: PendingWork

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
        self.now = now
        self.logger = logger
        let counters = LoaderCounters(configuration.metrics)
        self.counters = counters
        let hosts = HostLimiter(limit: configuration.maximumConnectionsPerHost)
        self.hosts = hosts
        let pending = PendingWork()
        self.pending = pending
        self.tiers = TierChain(memory: memory, disk: disk, shared: shared, counting: pending) { failure in
            Self.count(failure, counters: counters, logger: logger)
        }
        self.bodies = ByteBudget(limit: configuration.inFlightBodyLimit)
        self.flights = Flights(counting: pending) { run, priority in hosts.setPriority(priority, of: run) }
        let limit = (disk as? any SizedDataCaching)?.sizeLimit ?? memory?.configuration.costLimit
        self.maximumEntrySize = configuration.maximumEntrySize ?? limit.map { $0 / 20 } ?? .max
    }

    deinit {
        self.cancelBackgroundWork()
    }

    /// Counts and logs what failed in a tier.
    private static func count(_ failure: TierChain.Failure, counters: LoaderCounters, logger: Logger) {
        switch failure {
        case .storing(let key, let error):
            counters.storageFailure()
            logger.debug("Storing a response failed", metadata: ["key": "\(key.string)", "error": "\(error)"])
        case .sharedStoring(let key, let error):
            counters.sharedStorageFailure()
            logger.debug(
                "Storing a response in a shared tier failed",
                metadata: ["key": "\(key.string)", "error": "\(error.map { "\($0)" } ?? "its backlog is full")"]
            )
        case .invalidating(let key, let error):
            logger.debug("Invalidating failed", metadata: ["key": "\(key.string)", "error": "\(error)"])
        }
    }

    /// What the loader has done so far.
    public var statistics: Statistics {
        self.counters.snapshot
    }

    /// What the memory tier holds now, and has done: its entries and the sum of their costs
    /// (which ``Configuration/memoryCostLimit`` bounds), its hits and evictions; `nil` without
    /// a memory tier.
    ///
    /// - Complexity: O(1); it takes each of the tier's shard locks once, in turn.
    public var memoryTierStatistics: MemoryCacheStatistics? {
        self.tiers.memory?.statistics
    }

    // MARK: - Loading

    /// A run of the loader's flights.
    typealias Run = Flights<FlightKey, FlightAnswer>.Run

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
    /// decide: ``stream(_:body:policy:priority:interim:)``, its body collected.
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
        try await self.load(request, body: body, policy: policy, priority: priority, delivery: .whole(progress, nil))
    }

    /// ``load(_:body:policy:priority:progress:)``, telling `onWaiting` which flight the load
    /// waits for, so that its priority can be changed (see ``Prefetch``).
    nonisolated(nonsending) func load(
        _ request: HTTPRequest,
        policy: CachePolicy? = nil,
        priority: Priority,
        onWaiting: @escaping @Sendable (_ flight: FlightKey, _ caller: Int) -> Void
    ) async throws -> Resource {
        try await self.load(request, body: nil, policy: policy, priority: priority, delivery: .whole(nil, onWaiting))
    }

    nonisolated(nonsending) private func load(
        _ request: HTTPRequest,
        body: Data?,
        policy: CachePolicy?,
        priority: Priority,
        delivery: Delivery
    ) async throws -> Resource {
        // A hit is answered here, without the suspension point of a further async call.
        let prepared = try self.prepare(request, policy: policy)
        if let resource = prepared.answer { return resource }
        return try await self.answer(prepared, body: body, priority: priority, delivery: delivery).collected()
    }

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
    /// arrives, if it is being stored, has a `Content-Length`, is fresh and matches their
    /// `Vary`-named fields; otherwise they send their own. A shared body is read from the origin
    /// at its own pace, whatever its readers' pace; once it is written to the disk tier as it
    /// arrives (past ``Configuration/streamingThreshold``), at most 2 MiB of it is held in
    /// memory, and a reader that falls behind reads from the file. A request holds its place
    /// among ``Configuration/maximumConnectionsPerHost`` only until its head arrives.
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
        try await self.stream(self.prepare(request, policy: policy), body: body, priority: priority, interim: interim)
    }

    /// Answers a request prepared by ``prepare(_:policy:readsDisk:)`` as
    /// ``stream(_:body:policy:priority:interim:)`` does, from where its preparation left it:
    /// nothing is keyed, counted or looked up in memory again.
    ///
    /// - Parameters:
    ///   - prepared: The request, prepared.
    ///   - body: The body to send, for methods that have one. Default: `nil`.
    ///   - priority: How soon it goes if it has to wait for its host. Default: `.normal`.
    ///   - interim: Receives the interim responses (1xx) of the request this load sends.
    ///     Default: `nil`.
    /// - Returns: The response head, where it came from, and the body to read.
    /// - Throws: as ``stream(_:body:policy:priority:interim:)``.
    public func stream(
        _ prepared: PreparedLoad,
        body: Data? = nil,
        priority: Priority = .normal,
        interim: Interim? = nil
    ) async throws -> ResourceStream {
        try await self.answer(prepared, body: body, priority: priority, delivery: .streamed(interim))
    }

    /// What receives the interim responses (1xx) of a load: a proxy relays them to its client.
    public typealias Interim = @Sendable (HTTPResponse) async -> Void

    /// Prepares `request`: computes its key, looks up what is stored for it and decides what
    /// answers it, without waiting on anything (see ``PreparedLoad``). Its
    /// ``PreparedLoad/answer`` is the answer the cache gives at once, if it gives one; else
    /// ``stream(_:body:priority:interim:)`` takes the prepared request on from there.
    ///
    /// For a server that answers hits on the thread that read the request, without a hop to
    /// another executor. It reads the disk tier unless `readsDisk` is `false`: a disk read may
    /// wait for another process's lock, or write the journal, which a thread that must never
    /// wait (an event loop) leaves to another. Then the disk is asked only whether it has a file
    /// for the key (``DataCaching/mayContain(_:)``, one open that fails at a miss): if memory
    /// held nothing for the request and the disk has the file, the disk is read when the load
    /// resumes; without the file, the miss is decided at once. The request is counted in
    /// ``statistics`` here, once, and its answer too if it has one.
    ///
    /// - Parameters:
    ///   - request: The request; its `Cache-Control` and `Pragma` fields count.
    ///   - policy: How the request uses the cache. Default: `nil`, the configuration's.
    ///   - readsDisk: Whether an entry not in memory is looked for on disk now. Default: `true`.
    /// - Throws: ``LoadError`` with ``LoadError/Code/invalidRequest`` if the request has no
    ///   `http` or `https` URL.
    public func prepare(
        _ request: HTTPRequest,
        policy: CachePolicy? = nil,
        readsDisk: Bool = true
    ) throws -> PreparedLoad {
        guard let key = ResponseKey(of: request, transform: self.configuration.keyTransform) else {
            throw LoadError(.invalidRequest, "A request needs an absolute http or https URL to be loaded.")
        }
        self.counters.request()
        let step = self.step(for: request, key: key, policy: policy, readsDisk: readsDisk)
        if let resource = step?.answer { self.counters.answer(resource.source, bytes: resource.body.count) }
        return PreparedLoad(
            request: request,
            policy: policy,
            key: key,
            step: step,
            followsRedirects: self.configuration.maximumRedirects > 0
        )
    }

    // MARK: - Background work

    /// Waits until the work the loader does after answering is done: writing responses to
    /// disk, background revalidations (`stale-while-revalidate`), bodies read from the origin
    /// for streamed loads that share them, and loads whose callers all went (a cancelled load
    /// removes its temporary file as it stops). Call it before the process exits, so that what
    /// was loaded is on disk for the next launch and nothing is left half-written.
    public func waitForBackgroundWork() async {
        await self.pending.waitUntilIdle()
    }

    /// Cancels the background work that waits on the network: revalidations
    /// (`stale-while-revalidate`), and bodies read from the origin for streamed loads that share
    /// them (their readers' bodies fail). What they were storing is not stored; disk writes of
    /// answers already given go on. A server calls it when shutdown cannot wait any longer, then
    /// ``waitForBackgroundWork()``.
    public func cancelBackgroundWork() {
        self.flights.cancelUnwaited()
    }
}
