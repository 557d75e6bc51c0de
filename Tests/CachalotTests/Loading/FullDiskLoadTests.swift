import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

/// Loads into a cache on a full disk: a 1 MiB tmpfs, which needs root to mount (CI runs as root).
@Suite("ResourceLoader on a full disk", .enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
struct FullDiskLoadTests {
    @Test(
        "a body that cannot be spooled or stored is still answered whole, and the failure is counted",
        arguments: [false, true]
    )
    func answeredDespiteFullDisk(streamed: Bool) async throws {
        let directory = try TemporaryDirectory()
        let disk = try Tmpfs(at: directory.path + "/tiny", size: "1m")
        defer { disk.unmount() }
        try await Self.load(into: URL(fileURLWithPath: disk.path), streamed: streamed)
        // Nothing of the load keeps a file open there once the loader is gone: not a spooled body.
        #expect(disk.tryUnmount())
    }

    static func load(into mountPoint: URL, streamed: Bool) async throws {

        let body = Data((0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=600")], data: body) }
        defer { origin.stop() }
        // The cache believes it may hold 100 MB: only the file system stops it.
        let loader = try ResourceLoader(
            configuration: .init(streamingThreshold: 256 << 10),
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(
                directory: mountPoint.appendingPathComponent("cache"),
                configuration: .init(sizeLimit: 100_000_000)
            )
        )
        var received = Data()
        if streamed {
            let answer = try await loader.stream(HTTPRequest(method: .get, url: origin.url("/big")))
            for try await piece in answer.body { received.append(piece) }
        } else {
            received = try await loader.load(origin.url("/big")).body
        }
        #expect(received == body)
        await loader.waitForBackgroundWork()
        #expect(loader.statistics.storageFailures >= 1)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: mountPoint.path + "/cache/tmp")
        #expect(leftovers.isEmpty)
    }
}
