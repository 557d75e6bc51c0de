import AsyncHTTPClient
import CachalotAsyncHTTPClient
import CachalotImages
import CachalotServer
import CachalotTestOrigin
import CachalotTesting
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("cachalot serve")
struct ServeCommandTests {
    @Test("It proxies and caches, logs each request, and exits 0 on SIGTERM with the response on disk")
    func servesAndStops() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "proxied")
        }
        defer { origin.stop() }
        let tool = try CommandLineTool()
        let child = try tool.start(
            [
                "serve", "--origin", origin.url("/").absoluteString, "--listen", "127.0.0.1:0", "--memory", "0",
                "--admin", "127.0.0.1:0",
            ]
        )
        let ports = await CommandLineTool.offThePool { Self.listeningPorts(child) }
        let port = try #require(ports["proxy"])
        let adminPort = try #require(ports["admin"])
        let client = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: AsyncHTTPClientTransport.clientConfiguration()
        )
        // Shut down even when the test throws: a client freed running traps.
        defer { Self.shutDownIfRunning(client) }
        var statuses: [String] = []
        for _ in 0..<2 {
            let (headers, body) = try await Self.get(client, "http://127.0.0.1:\(port)/a")
            #expect(String(buffer: body) == "proxied")
            statuses.append(headers["cache-status"].first ?? "")
        }
        // A response is counted once it has gone, which may be just after the client has it (a
        // disk hit's task counts it when its write completes): scraped again until it shows.
        var text = ""
        for _ in 0..<100 {
            text = String(buffer: try await Self.get(client, "http://127.0.0.1:\(adminPort)/metrics").body)
            if text.contains("cachalot_proxy_requests{cache=\"hit\"} 1") { break }
        }
        try await client.shutdown()
        #expect(text.contains("cachalot_proxy_requests{cache=\"hit\"} 1"), "\(text)")
        #expect(text.contains("cachalot_proxy_requests{cache=\"forward\"} 1"))
        #expect(text.contains("cachalot_proxy_bytes{source=\"cache\"} 7"))
        #expect(text.contains("cachalot_proxy_origin_head_seconds_count 1"))
        #expect(text.contains("cachalot_disk_entries 1"))
        #expect(statuses[0] == "cachalot; fwd=uri-miss; fwd-status=200; stored")
        #expect(statuses[1].hasPrefix("cachalot; hit"))
        #expect(origin.requests.count == 1)
        child.send(SIGTERM)
        let run = await CommandLineTool.finish(child)
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.errors.contains("GET /a 200"))
        let listing = try await tool.run(["ls"])
        #expect(listing.output.contains("/a"))
    }

    @Test("The environment fills in the options the command line does not give, which win over it")
    func environment() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "env") }
        defer { origin.stop() }
        let tool = try CommandLineTool()
        // Alone, the environment's listener and memory would be refused.
        let refused = try await tool.run(
            ["serve", "--listen", "127.0.0.1:0"],
            environment: ["CACHALOT_ORIGIN": origin.url("/").absoluteString, "CACHALOT_MEMORY": "lots"]
        )
        #expect(refused.status == 64)
        #expect(refused.errors.contains("CACHALOT_MEMORY"))
        let child = try tool.start(
            ["serve", "--listen", "127.0.0.1:0", "--memory", "0"],
            environment: [
                "CACHALOT_ORIGIN": origin.url("/").absoluteString, "CACHALOT_LISTEN": "nowhere",
                "CACHALOT_MEMORY": "lots",
            ]
        )
        let ports = await CommandLineTool.offThePool { Self.listeningPorts(child) }
        let port = try #require(ports["proxy"])
        let client = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: AsyncHTTPClientTransport.clientConfiguration()
        )
        // Shut down even when the test throws: a client freed running traps.
        defer { Self.shutDownIfRunning(client) }
        let (_, body) = try await Self.get(client, "http://127.0.0.1:\(port)/e")
        try await client.shutdown()
        #expect(String(buffer: body) == "env")
        child.send(SIGTERM)
        #expect(await CommandLineTool.finish(child).status == 0)
    }

    @Test(
        "Two nodes with their own disks share one database: the second answers what the first fetched",
        .enabled(if: PostgresCluster.isAvailable, "needs PostgreSQL"),
        .timeLimit(.minutes(2))
    )
    func nodesShareADatabase() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "once")
        }
        defer { origin.stop() }
        try await PostgresCluster.with { cluster in
            let client = HTTPClient(
                eventLoopGroup: HTTPClient.defaultEventLoopGroup,
                configuration: AsyncHTTPClientTransport.clientConfiguration()
            )
            // Shut down even when the test throws: a client freed running traps.
            defer { Self.shutDownIfRunning(client) }
            var statuses: [String] = []
            var metrics = ""
            for _ in 0..<2 {
                let node = try CommandLineTool()
                let child = try node.start(
                    [
                        "serve", "--origin", origin.url("/").absoluteString, "--listen", "127.0.0.1:0",
                        "--admin", "127.0.0.1:0", "--shared", cluster.url(),
                    ]
                )
                let ports = await CommandLineTool.offThePool { Self.listeningPorts(child) }
                let port = try #require(ports["proxy"])
                let (headers, body) = try await Self.get(client, "http://127.0.0.1:\(port)/a")
                #expect(String(buffer: body) == "once")
                statuses.append(headers["cache-status"].first ?? "")
                let adminPort = try #require(ports["admin"])
                metrics = String(buffer: try await Self.get(client, "http://127.0.0.1:\(adminPort)/metrics").body)
                // Stopping waits for the write to the database.
                child.send(SIGTERM)
                #expect(await CommandLineTool.finish(child).status == 0)
            }
            try await client.shutdown()
            #expect(statuses[0].contains("fwd=uri-miss"))
            #expect(statuses[1].hasPrefix("cachalot; hit") && statuses[1].contains("detail=shared"), "\(statuses)")
            #expect(metrics.contains("cachalot_shared_hits 1"), "\(metrics)")
            #expect(origin.requests.count == 1)
        }
    }

    @Test("A missing origin is a usage error")
    func missingOrigin() async throws {
        let run = try await CommandLineTool().run(["serve", "--listen", "127.0.0.1:0"])
        #expect(run.status == 64)
        #expect(run.errors.contains("--origin"))
    }

    /// Reads the child's standard error until it says where it listens; the ports by listener
    /// (`proxy`, `admin`), or none if it ended first.
    @Test("--images serves signed image paths from the origin's images; it needs a key or --unsigned-images")
    func images() async throws {
        let jpeg = try ImageEncoder.jpeg(
            Bitmap(width: 320, height: 240, format: .gray8, pixels: Data((0..<320 * 240).map { UInt8($0 % 256) }))
        )
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], data: jpeg) }
        defer { origin.stop() }
        let tool = try CommandLineTool()
        let base = ["serve", "--origin", origin.url("/").absoluteString, "--listen", "127.0.0.1:0", "--images"]
        let keyless = try await tool.run(base)
        #expect(keyless.status == 64 && keyless.errors.contains("--image-key"), "\(keyless.errors)")
        let short = try await tool.run(base + ["--image-key", "abcd"])
        #expect(short.status == 64 && short.errors.contains("32"))

        let key = String(repeating: "0f", count: 32)
        let child = try tool.start(base, environment: ["CACHALOT_IMAGE_KEY": key])
        let port = try #require(await CommandLineTool.offThePool { Self.listeningPorts(child) }["proxy"])
        let client = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: AsyncHTTPClientTransport.clientConfiguration()
        )
        // Shut down even when the test throws: a client freed running traps.
        defer { Self.shutDownIfRunning(client) }
        let signed = "/w32/photo.jpg"
        let signature = ImageEndpoint.signature(of: signed, key: Data(repeating: 0x0F, count: 32))
        var statuses: [UInt] = []
        for path in ["/_image/\(signature)\(signed)", "/_image/unsafe\(signed)"] {
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
            request.headers.add(name: "Accept", value: "image/webp")
            let response = try await client.execute(request, timeout: .seconds(30))
            var body = ByteBuffer()
            for try await piece in response.body { body.writeImmutableBuffer(piece) }
            statuses.append(response.status.code)
            if response.status == .ok {
                let data = Data(buffer: body)
                #expect(ImageFormat(sniffing: data) == .webp)
                #expect(try ImageDecoder().size(of: data) == (32, 24))
            }
        }
        try await client.shutdown()
        #expect(statuses == [200, 403])
        child.send(SIGTERM)
        let run = await CommandLineTool.finish(child)
        #expect(run.status == 0, "\(run.errors)")
    }

    /// Shuts `client` down if the test did not get as far as doing so.
    /// The headers and whole body of a `GET` of `url`.
    private static func get(
        _ client: HTTPClient,
        _ url: String
    ) async throws -> (headers: HTTPHeaders, body: ByteBuffer) {
        let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
        var body = ByteBuffer()
        for try await piece in response.body { body.writeImmutableBuffer(piece) }
        return (response.headers, body)
    }

    private static func shutDownIfRunning(_ client: HTTPClient) {
        try? client.syncShutdown()
    }

    private static func listeningPorts(_ child: ChildProcess) -> [String: Int] {
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(child.errors, $0.baseAddress, $0.count) }
            if count <= 0 { return [:] }
            text += String(decoding: buffer[0..<count], as: UTF8.self)
            guard let line = text.split(separator: "\n").first(where: { $0.contains("Listening") }) else { continue }
            var ports: [String: Int] = [:]
            for name in ["proxy", "admin"] {
                guard let range = line.range(of: "\(name)=127.0.0.1:") else { continue }
                ports[name] = Int(line[range.upperBound...].prefix { $0.isNumber })
            }
            return ports
        }
    }

    @Test("An origin the proxy cannot use is refused with status 64, not a trap of the HTTP client's")
    func unusableOrigin() async throws {
        let tool = try CommandLineTool()
        let run = try await tool.run(["serve", "--origin", "ftp://127.0.0.1/", "--listen", "127.0.0.1:0"])
        #expect(run.status == 64, "\(run.errors)")
    }
}
