import Cachalot
import CachalotImages
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization

/// A caching reverse proxy: answers HTTP/1.1 clients from a `ResourceLoader`'s cache, and
/// goes to one origin for what the cache cannot answer, following the rules of a shared cache
/// (RFC 9111), with RFC 9211's `Cache-Status` on every response.
///
/// ```swift
/// let loader = try ResourceLoader(
///     configuration: .init(
///         rules: CacheRules(isShared: true, targetedFields: CacheServer.targetedFields),
///         maximumRedirects: 0
///     ),
///     transport: AsyncHTTPClientTransport(),
///     disk: DiskCache(directory: cacheDirectory)
/// )
/// let server = try CacheServer(
///     configuration: .init(origin: URL(string: "http://127.0.0.1:8000")!),
///     loader: loader,
///     logger: logger
/// )
/// let group = ServiceGroup(services: [server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
/// try await group.run()
/// ```
///
/// It is a `Service` (swift-service-lifecycle): on graceful shutdown it stops accepting,
/// closes idle connections, and lets requests in flight and the loader's background work
/// (shared downloads, disk writes) finish for at most ``Limits/shutdownGracePeriod``; then it
/// closes what is left, cancels the loader's background work, and returns once nothing runs.
public final class CacheServer: Service, Sendable {
    /// The configuration the server was made with.
    public let configuration: Configuration
    let loader: ResourceLoader
    let logger: Logger
    /// The proxy listener's connections.
    let connections: ConnectionRegistry
    /// The admin listener's connections, counted apart.
    let adminConnections: ConnectionRegistry
    let metrics: ServerMetrics?
    /// Writes the access log; `nil` without one.
    let accessLog: AccessLogWriter?
    /// Writes what the event loops log to ``logger``, off them.
    let loopLog: LoopLog
    /// The image endpoint and the pipeline that makes its images, over ``loader``.
    let images: (ImageEndpoint, ImagePipeline)?
    private let group: any EventLoopGroup
    private let state = Mutex(State())

    private struct State {
        var addresses: Addresses?
        var failure: (any Error)?
        var waiters: [CheckedContinuation<Addresses, any Error>] = []
        /// When requests still in flight at shutdown are cut off.
        var deadline: Scheduled<Void>?
    }

    /// The targeted cache-control fields (RFC 9213) a proxy obeys, most specific first: our own
    /// `Cachalot-Cache-Control`, then `CDN-Cache-Control`. Give them to the loader's rules
    /// (`CacheRules.targetedFields`) so that, where an origin sends one, it governs this cache
    /// instead of `Cache-Control` and `Expires`.
    public static let targetedFields: [HTTPField.Name] = [
        HTTPField.Name("Cachalot-Cache-Control")!, HTTPField.Name("CDN-Cache-Control")!,
    ]

    /// The addresses the server listens on, once it does, with the ports a port of 0 picked.
    public struct Addresses: Sendable {
        /// The proxy's listener's address.
        public var proxy: SocketAddress
        /// The admin listener's address; `nil` if ``Configuration/admin`` is `nil`.
        public var admin: SocketAddress?
    }

    /// Makes a server; it listens once ``run()`` is called.
    ///
    /// - Parameters:
    ///   - configuration: Where to listen, the origin, limits. No default.
    ///   - loader: The loader that answers requests. Give it `CacheRules.sharedCache` rules
    ///     and no redirects to follow (`maximumRedirects: 0`): a proxy relays redirects.
    ///   - group: The event loops that serve connections. Default: NIO's shared ones.
    ///   - logger: Where the server logs: its start and stop, and each client it closes for not
    ///     reading, at info; dropped access log lines at warning; errors and internals at debug.
    ///     Requests go to ``Configuration/accessLog``, not here.
    /// - Throws: ``ServerError`` if the configuration cannot work (an origin that is not an
    ///   `http` or `https` URL with a host and no query, a name that is not an HTTP token, an empty
    ///   or non-ASCII admin token, a limit out of range, an image endpoint whose prefix, key or
    ///   limits are invalid), or if `loader` does not follow the rules of a shared cache.
    public init(
        configuration: Configuration,
        loader: ResourceLoader,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger
    ) throws(ServerError) {
        try configuration.validate()
        guard loader.configuration.rules.isShared else {
            throw ServerError("A proxy's loader must follow the rules of a shared cache (CacheRules.sharedCache).")
        }
        self.configuration = configuration
        self.loader = loader
        self.group = group
        self.logger = logger
        self.loopLog = LoopLog(logger)
        self.connections = ConnectionRegistry(limit: configuration.limits.maximumConnections)
        self.adminConnections = ConnectionRegistry(limit: configuration.limits.maximumAdminConnections)
        let metrics = configuration.metrics.map(ServerMetrics.init)
        self.metrics = metrics
        self.accessLog = configuration.accessLog.map { accessLog in
            AccessLogWriter(accessLog, logger: logger) { metrics?.accessLogDropped(lines: $0) }
        }
        if let endpoint = configuration.images {
            do {
                let pipeline = try ImagePipeline(
                    loader: loader,
                    variants: endpoint.variants,
                    // Its answers are bytes (encodedImage), which keeps no bitmap in memory.
                    configuration: .init(
                        memoryCostLimit: 1 << 20,
                        maximumConcurrentDecodes: endpoint.threads,
                        maximumQueuedDecodes: endpoint.queueLimit,
                        decoder: ImageDecoder(maximumPixelCount: endpoint.maximumPixelCount),
                        maximumSourceSize: endpoint.maximumSourceSize
                    )
                )
                self.images = (endpoint, pipeline)
            } catch {
                throw ServerError("The image endpoint cannot start: \(error.message)")
            }
        } else {
            self.images = nil
        }
    }

    /// The addresses the server listens on: waits until ``run()`` has bound them.
    ///
    /// - Throws: The error that kept ``run()`` from listening.
    public var addresses: Addresses {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                self.state.withLock { state in
                    if let addresses = state.addresses {
                        continuation.resume(returning: addresses)
                    } else if let failure = state.failure {
                        continuation.resume(throwing: failure)
                    } else {
                        state.waiters.append(continuation)
                    }
                }
            }
        }
    }

    /// Listens and serves until graceful shutdown or cancellation.
    ///
    /// Binds the proxy's listener, then the admin's, and publishes their ``addresses``. On
    /// graceful shutdown (a `ServiceGroup`'s `SIGTERM`, say) it stops accepting, lets requests in
    /// flight and the loader's background work finish for at most
    /// ``Limits/shutdownGracePeriod``, then closes the rest, writes the lines the
    /// ``Configuration/accessLog`` still holds, and returns.
    ///
    /// - Throws: The error that kept a listener from binding (such as NIO's `IOError` when the
    ///   address is in use or the host cannot be resolved; the proxy's port is closed again if the
    ///   admin's cannot be bound), or a ``ServerError`` if the proxy's listener has no address.
    ///   Once listening, it returns without throwing when shut down, and throws only if
    ///   accepting connections fails.
    public func run() async throws {
        self.accessLog?.start()
        // What the event loops log is written by this child task.
        async let loopLogWritten: Void = self.loopLog.run()
        do {
            try await self.listenAndServe()
        } catch {
            self.loopLog.finish()
            await loopLogWritten
            await self.accessLog?.finish()
            throw error
        }
        self.loopLog.finish()
        await loopLogWritten
        // The access log's last lines go before the last line of the ordinary log.
        await self.accessLog?.finish()
        self.logger.info("Stopped")
    }

    /// ``run()`` but for the access log's writer.
    private func listenAndServe() async throws {
        let proxy = ProxyResponder(server: self)
        let listeners: (proxy: Listener, admin: Listener?)
        var proxyListener: Listener?
        do {
            let bound = try await self.bind(self.configuration.listen, answeringAtOnce: proxy)
            proxyListener = bound
            var adminListener: Listener?
            if let admin = self.configuration.admin {
                adminListener = try await self.bind(admin, answeringAtOnce: nil)
            }
            listeners = (bound, adminListener)
        } catch {
            // The proxy's port, if it was bound, is not left open when the admin's cannot be.
            try? await proxyListener?.channel.close()
            self.publish(.failure(error))
            throw error
        }
        let all = [listeners.proxy.channel] + (listeners.admin.map { [$0.channel] } ?? [])
        guard let proxyAddress = listeners.proxy.channel.localAddress else {
            let error = ServerError("The proxy's listener has no address.")
            self.publish(.failure(error))
            for channel in all { try? await channel.close() }
            throw error
        }
        self.publish(.success(Addresses(proxy: proxyAddress, admin: listeners.admin?.channel.localAddress)))
        var metadata: Logger.Metadata = [
            "proxy": "\(Self.describe(proxyAddress))", "origin": "\(self.configuration.origin)",
        ]
        if let admin = listeners.admin?.channel.localAddress { metadata["admin"] = "\(Self.describe(admin))" }
        self.logger.info("Listening", metadata: metadata)
        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { try await self.accept(listeners.proxy, into: self.connections, with: proxy) }
                if let admin = listeners.admin {
                    group.addTask {
                        try await self.accept(admin, into: self.adminConnections, with: AdminResponder(server: self))
                    }
                }
            }
        } onGracefulShutdown: {
            self.logger.info("Shutting down: no new connections; finishing requests in flight")
            for channel in all { channel.close(promise: nil) }
            self.connections.shutDown()
            self.adminConnections.shutDown()
            let grace = TimeAmount(self.configuration.limits.shutdownGracePeriod)
            let deadline = all[0].eventLoop.scheduleTask(in: grace) {
                [connections = self.connections, adminConnections = self.adminConnections, loader = self.loader] in
                connections.closeAll()
                adminConnections.closeAll()
                loader.cancelBackgroundWork()
            }
            self.state.withLock { $0.deadline = deadline }
        }
        // Shared downloads and disk writes go on until they end, or until the deadline; the
        // image endpoint's variants first, since they may load originals.
        await self.images?.1.waitForBackgroundWork()
        await self.loader.waitForBackgroundWork()
        self.state.withLock { $0.deadline }?.cancel()
    }

    typealias Listener = NIOAsyncChannel<AcceptedConnection, Never>

    /// Listens on `address`; with `immediate`, its connections answer what the cache answers at
    /// once on their event loop: their ``ServerCodec`` asks an ``ImmediateResponder``.
    private func bind(_ address: Address, answeringAtOnce immediate: ProxyResponder?) async throws -> Listener {
        let limits = self.configuration.limits
        let headTimeout = TimeAmount(limits.requestHeadTimeout)
        let bodyTimeout = TimeAmount(limits.requestBodyTimeout)
        let bodyTotalTimeout = TimeAmount(limits.requestBodyTotalTimeout)
        let sendTimeout = TimeAmount(limits.sendTimeout)
        return try await ServerBootstrap(group: self.group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .bind(host: address.host, port: address.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(SendTimer(timeout: sendTimeout, log: self.loopLog))
                    try pipeline.addHandler(
                        RequestDecoder(
                            maximumRequestLine: limits.maximumRequestLine,
                            maximumHeaderBytes: limits.maximumHeaderBytes
                        )
                    )
                    // The proxy's 408s go to the access log; the admin listener's requests are not logged.
                    let onBodyTimeout = immediate.map { _ in
                        { (head: HTTPRequestHead, remote: SocketAddress?, elapsed: TimeAmount) in
                            self.log(
                                ServerRequest(head: head, client: Client(remote)),
                                status: 408,
                                cacheStatus: "request-timeout",
                                bytes: 0,
                                since: .now - .nanoseconds(elapsed.nanoseconds)
                            )
                        }
                    }
                    // Told of the responses by the codec, which writes them: not on their way.
                    let phases = RequestPhases(
                        headTimeout: headTimeout,
                        bodyIdle: bodyTimeout,
                        bodyTotal: bodyTotalTimeout,
                        log: self.loopLog,
                        onBodyTimeout: onBodyTimeout
                    )
                    // What the cache answers at once, the codec writes itself; the admin listener
                    // answers everything in its connections' tasks.
                    let answers = immediate.map { ImmediateResponder(responder: $0, connections: self.connections) }
                    try pipeline.addHandler(ServerCodec(phases: phases, answers: answers))
                    try pipeline.addHandler(phases)
                    let end = ConnectionEnd()
                    try pipeline.addHandler(end)
                    return AcceptedConnection(channel, end: end)
                }
            }
    }

    private func accept(
        _ listener: Listener,
        into connections: ConnectionRegistry,
        with responder: some Responder
    ) async throws {
        try await listener.executeThenClose { inbound in
            try await withThrowingDiscardingTaskGroup { group in
                for try await connection in inbound {
                    guard connections.admit(connection.channel) else {
                        // Every connection busy, or shutting down: closed at once, as its owner must.
                        group.addTask { try? await connection.channel.close() }
                        continue
                    }
                    guard responder.runsOnEventLoop else {
                        group.addTask { await self.serve(connection, in: connections, with: responder) }
                        continue
                    }
                    // The connection's task, and the flights it starts, on the connection's loop.
                    let loop = EventLoopExecutor(connection.channel.eventLoop)
                    group.addTask(executorPreference: loop) {
                        await TaskPreference.$executor.withValue(loop) {
                            await self.serve(connection, in: connections, with: responder)
                        }
                    }
                }
            }
        }
    }

    private func publish(_ result: Result<Addresses, any Error>) {
        let waiters = self.state.withLock { state in
            switch result {
            case .success(let addresses): state.addresses = addresses
            case .failure(let error): state.failure = error
            }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    /// `host:port`, or `[v6]:port`.
    private static func describe(_ address: SocketAddress) -> String {
        let ip = address.ipAddress ?? "?"
        return (ip.contains(":") ? "[\(ip)]" : ip) + ":\(address.port ?? 0)"
    }
}

extension CacheServer {
    /// Adds a request's line to the access log, if there is one; the line is written later, off
    /// the event loop.
    func log(
        _ request: ServerRequest,
        status: Int,
        cacheStatus: @autoclosure () -> String,
        bytes: Int,
        since start: ContinuousClock.Instant
    ) {
        guard let accessLog = self.accessLog else { return }
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        accessLog.append(
            AccessLogRecord(
                time: Date().timeIntervalSince1970,
                client: request.client.ip,
                method: request.head.method.spelling,
                target: request.head.uri,
                status: status,
                bytes: bytes,
                microseconds: seconds * 1_000_000 + attoseconds / 1_000_000_000_000,
                cacheStatus: cacheStatus()
            )
        )
    }
}
