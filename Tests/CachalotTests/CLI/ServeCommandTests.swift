import AsyncHTTPClient
import CachalotAsyncHTTPClient
import CachalotTestOrigin
import Foundation
import NIOCore
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
            ["serve", "--origin", origin.url("/").absoluteString, "--listen", "127.0.0.1:0", "--memory", "0"]
        )
        let port = try #require(await CommandLineTool.offThePool { Self.listeningPort(child) })
        let client = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: AsyncHTTPClientTransport.clientConfiguration()
        )
        var statuses: [String] = []
        for _ in 0..<2 {
            let response = try await client.execute(
                HTTPClientRequest(url: "http://127.0.0.1:\(port)/a"),
                timeout: .seconds(30)
            )
            var body = ByteBuffer()
            for try await piece in response.body { body.writeImmutableBuffer(piece) }
            #expect(String(buffer: body) == "proxied")
            statuses.append(response.headers["cache-status"].first ?? "")
        }
        try await client.shutdown()
        #expect(statuses[0] == "cachalot; fwd=miss; fwd-status=200; stored")
        #expect(statuses[1].hasPrefix("cachalot; hit"))
        #expect(origin.requests.count == 1)
        child.send(SIGTERM)
        let run = await CommandLineTool.finish(child)
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.errors.contains("GET /a 200"))
        let listing = try await tool.run(["ls"])
        #expect(listing.output.contains("/a"))
    }

    @Test("A missing origin is a usage error")
    func missingOrigin() async throws {
        let run = try await CommandLineTool().run(["serve", "--listen", "127.0.0.1:0"])
        #expect(run.status == 64)
        #expect(run.errors.contains("--origin"))
    }

    /// Reads the child's standard error until it says where it listens; the port, or `nil` if it ended first.
    private static func listeningPort(_ child: ChildProcess) -> Int? {
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(child.errors, $0.baseAddress, $0.count) }
            if count <= 0 { return nil }
            text += String(decoding: buffer[0..<count], as: UTF8.self)
            guard let line = text.split(separator: "\n").first(where: { $0.contains("Listening") }),
                let range = line.range(of: "proxy=127.0.0.1:")
            else { continue }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
    }
}
