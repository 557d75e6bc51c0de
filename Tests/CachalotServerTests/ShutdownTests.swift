import AsyncHTTPClient
import Cachalot
import CachalotAsyncHTTPClient
import CachalotServer
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Graceful shutdown")
struct ShutdownTests {
    @Test("A request in flight when shutdown begins is finished and stored; run() then returns")
    func drainsInFlight() async throws {
        let gate = Gate()
        let arrived = Gate()
        let origin = try await TestOrigin.start { _ in
            arrived.open()
            await gate.wait()
            return .init(fields: [("Cache-Control", "max-age=60")], body: "finished")
        }
        let proxy = try await ProxyHarness(origin: origin)
        async let reply = proxy.send("/slow")
        await arrived.wait()
        await proxy.beginShutdown()
        gate.open()
        let finished = try await reply
        #expect(finished.status == 200)
        #expect(finished.text == "finished")
        try await proxy.stop()
        #expect(try proxy.disk.count == 1)
    }

    @Test("Shutting down while clients connect as fast as they can ends run(), and never stops the process")
    func connectionsDuringShutdown() async throws {
        let origin = try await TestOrigin.start { _ in .init(body: "x") }
        defer { origin.stop() }
        for _ in 0..<20 {
            let proxy = try await ProxyHarness(origin: origin)
            let port = proxy.port
            let connecting = Task {
                // Plain connects, closed at once: some are accepted as the listener closes.
                while !Task.isCancelled {
                    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                    var address = sockaddr_in()
                    address.sin_family = sa_family_t(AF_INET)
                    address.sin_port = in_port_t(UInt16(port).bigEndian)
                    address.sin_addr.s_addr = inet_addr("127.0.0.1")
                    let result = withUnsafePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                        }
                    }
                    close(descriptor)
                    if result != 0 { await Task.yield() }
                }
            }
            try await proxy.stop()
            connecting.cancel()
            await connecting.value
        }
    }

    @Test("A response still streaming at the deadline is cut off and leaves no entry on disk")
    func deadlineCutsOff() async throws {
        let reached = Gate()
        let origin = try await TestOrigin.start { _ in
            var reply = TestOrigin.Reply(fields: [("Cache-Control", "max-age=60")], data: Data(count: 1 << 20))
            reply.stall = (after: 100_000, reached: { reached.open() })
            return reply
        }
        let proxy = try await ProxyHarness(origin: origin) { $0.limits.shutdownGracePeriod = .milliseconds(100) }
        let response = try await proxy.start("/stalls")
        await reached.wait()
        try await proxy.stop()
        var received = 0
        await #expect(throws: (any Error).self) {
            for try await piece in response.body { received += piece.readableBytes }
        }
        #expect(received < 1 << 20)
        #expect(try proxy.disk.count == 0)
        let leftovers = try FileManager.default.contentsOfDirectory(
            atPath: proxy.disk.directory.appending(path: "tmp").path
        )
        #expect(leftovers.isEmpty)
    }
}

@Suite("Starting")
struct StartTests {
    @Test("An address already in use fails run() and addresses with the error, and nothing stays bound")
    func addressInUse() async throws {
        let origin = try await TestOrigin.start()
        defer { origin.stop() }
        let directory = try TemporaryDirectory()
        let loader = try ResourceLoader(
            configuration: .init(rules: .sharedCache),
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: directory.url)
        )
        let server = try CacheServer(
            configuration: .init(
                origin: origin.url("/"),
                listen: .init(host: "127.0.0.1", port: 0),
                admin: .init(host: "127.0.0.1", port: origin.port)
            ),
            loader: loader,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        await #expect(throws: (any Error).self) { try await server.run() }
        await #expect(throws: (any Error).self) { _ = try await server.addresses }
    }

    /// Configurations each with one new bound out of range.
    static let outOfRange: [(String, @Sendable (inout CacheServer.Configuration) -> Void)] = [
        ("no admin connections", { $0.limits.maximumAdminConnections = 0 }),
        ("a request body timeout of zero", { $0.limits.requestBodyTimeout = .zero }),
        ("a total request body timeout of zero", { $0.limits.requestBodyTotalTimeout = .zero }),
        ("an access log without a buffer", { $0.accessLog = AccessLog(bufferSize: 0) }),
        ("an access log never flushed", { $0.accessLog = AccessLog(flushInterval: .zero) }),
    ]

    @Test("A bound out of range is refused", arguments: Self.outOfRange.map(\.0))
    func boundOutOfRange(name: String) throws {
        let change = try #require(Self.outOfRange.first { $0.0 == name }?.1)
        let loader = try ResourceLoader(
            configuration: .init(rules: .sharedCache),
            transport: AsyncHTTPClientTransport()
        )
        var configuration = CacheServer.Configuration(origin: URL(string: "http://127.0.0.1:1/")!)
        _ = try CacheServer(
            configuration: configuration,
            loader: loader,
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        change(&configuration)
        #expect(throws: ServerError.self) {
            _ = try CacheServer(
                configuration: configuration,
                loader: loader,
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            )
        }
    }

    @Test("A loader with private rules is refused: a proxy is a shared cache")
    func privateRulesRefused() async throws {
        let loader = try ResourceLoader(transport: AsyncHTTPClientTransport())
        #expect(throws: ServerError.self) {
            _ = try CacheServer(
                configuration: .init(origin: URL(string: "http://127.0.0.1:1/")!),
                loader: loader,
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
            )
        }
    }
}

@Suite("Listening addresses")
struct AddressTests {
    @Test("host:port, [v6]:port and :port (every interface) are read; anything else is refused")
    func parsing() {
        #expect(CacheServer.Address("127.0.0.1:8080") == .init(host: "127.0.0.1", port: 8080))
        #expect(CacheServer.Address("[::1]:9090") == .init(host: "::1", port: 9090))
        #expect(CacheServer.Address(":8080") == .init(host: "0.0.0.0", port: 8080))
        #expect(CacheServer.Address("127.0.0.1:0")?.port == 0)
        for invalid in ["127.0.0.1", "127.0.0.1:65536", "127.0.0.1:-1", "host:port", ""] {
            #expect(CacheServer.Address(invalid) == nil, "\(invalid)")
        }
        #expect(CacheServer.Address(host: "::1", port: 80).description == "[::1]:80")
    }
}
