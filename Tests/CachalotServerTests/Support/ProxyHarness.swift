import AsyncHTTPClient
import Cachalot
import CachalotAsyncHTTPClient
import CachalotNIO
import CachalotServer
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle

/// A `CacheServer` on 127.0.0.1 (port 0) in front of a `TestOrigin`, with a disk cache in a
/// temporary directory, and an HTTP client that talks to it.
final class ProxyHarness: Sendable {
    let origin: TestOrigin
    /// What the server logged.
    let logs = LogRecorder()
    let directory: TemporaryDirectory
    let disk: DiskCache
    let loader: ResourceLoader
    let server: CacheServer
    let port: Int
    let adminPort: Int?
    private let group: ServiceGroup
    private let running: Task<Void, any Error>
    private var client: HTTPClient { Self.client }

    /// One client for every test, living as long as the process: a test that fails before
    /// `stop()` leaves no client to shut down.
    private static let client: HTTPClient = {
        var configuration = AsyncHTTPClientTransport.clientConfiguration(idleTimeout: .seconds(30))
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// A response as the client received it.
    struct Reply: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: Data
        var text: String { String(decoding: self.body, as: UTF8.self) }
        /// The proxy's `Cache-Status` member.
        var cacheStatus: String { self.headers["cache-status"].last ?? "" }
    }

    init(
        origin: TestOrigin,
        originTimeout: Duration = .seconds(30),
        memoryCostLimit: Int? = 0,
        targetedFields: [HTTPField.Name] = CacheServer.targetedFields,
        staleIfUnreachable: Bool = false,
        streamingThreshold: Int? = nil,
        diskWatch: DiskWatch? = nil,
        configure: (inout CacheServer.Configuration) -> Void = { _ in }
    ) async throws {
        self.origin = origin
        self.directory = try TemporaryDirectory()
        self.disk = try DiskCache(directory: self.directory.url.appending(path: "cache"))
        var loaderConfiguration = ResourceLoader.Configuration(
            rules: CacheRules(
                isShared: true,
                targetedFields: targetedFields,
                isStaleIfUnreachableEnabled: staleIfUnreachable
            ),
            memoryCostLimit: memoryCostLimit
        )
        loaderConfiguration.maximumRedirects = 0
        if let streamingThreshold { loaderConfiguration.streamingThreshold = streamingThreshold }
        self.loader = try ResourceLoader(
            configuration: loaderConfiguration,
            // The proxy's own transport, as `cachalot serve` has it.
            transport: NIOTransport(configuration: .init(responseTimeout: originTimeout, idleTimeout: originTimeout)),
            disk: diskWatch.map { [disk = self.disk] in WatchedDisk(disk: disk, watch: $0) } ?? self.disk
        )
        var configuration = CacheServer.Configuration(
            origin: origin.url("/"),
            listen: .init(host: "127.0.0.1", port: 0),
            admin: .init(host: "127.0.0.1", port: 0)
        )
        configure(&configuration)
        let logger = self.logs.logger()
        self.server = try CacheServer(configuration: configuration, loader: self.loader, logger: logger)
        let group = ServiceGroup(services: [self.server], logger: logger)
        self.group = group
        self.running = Task { try await group.run() }
        let addresses = try await self.server.addresses
        self.port = addresses.proxy.port ?? 0
        self.adminPort = addresses.admin?.port
    }

    /// Sends a request to the proxy (or, with `admin`, to its admin listener) and reads the whole answer.
    func send(
        _ path: String,
        method: HTTPMethod = .GET,
        headers: [(String, String)] = [],
        body: Data? = nil,
        admin: Bool = false
    ) async throws -> Reply {
        let port = admin ? (self.adminPort ?? 0) : self.port
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await self.client.execute(request, timeout: .seconds(30))
        var collected = Data()
        for try await piece in response.body { collected.append(contentsOf: piece.readableBytesView) }
        return Reply(status: Int(response.status.code), headers: response.headers, body: collected)
    }

    /// Starts a request and returns its head, with the body to read as it arrives.
    func start(_ path: String, headers: [(String, String)] = []) async throws -> HTTPClientResponse {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(self.port)\(path)")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        return try await self.client.execute(request, timeout: .seconds(30))
    }

    /// Begins a graceful shutdown, as SIGTERM would.
    func beginShutdown() async {
        await self.group.triggerGracefulShutdown()
    }

    /// Shuts the server down gracefully and waits until it has stopped; stops the origin.
    func stop() async throws {
        await self.group.triggerGracefulShutdown()
        try await self.running.value
        self.origin.stop()
    }
}
