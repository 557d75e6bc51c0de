import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Synchronization
import Testing

@testable import Cachalot

/// The cache's first promise, checked over a random mix of origin behaviours, of damage to the
/// cache directory between loads, and of `cachalot` processes killed in the middle of a load:
/// every body it answers with is one the origin sent for that URL.
@Suite("Answers are always what the origin sent", .timeLimit(.minutes(2)))
struct InvariantTests {
    /// What the origin sent, by path: every body, and the version it serves now.
    final class Ledger: Sendable {
        private let state = Mutex<(sent: [String: Set<Data>], versions: [String: Int])>(([:], [:]))

        func record(_ body: Data, for path: String) {
            self.state.withLock { _ = $0.sent[path, default: []].insert(body) }
        }
        func sent(_ path: String) -> Set<Data> { self.state.withLock { $0.sent[path] ?? [] } }
        func version(_ path: String) -> Int { self.state.withLock { $0.versions[path] ?? 0 } }
        func bump(_ path: String) { self.state.withLock { $0.versions[path, default: 0] += 1 } }
    }

    static func body(_ path: String, version: Int, size: Int) -> Data {
        var generator = SeededGenerator(seed: UInt64(truncatingIfNeeded: path.hashValue &+ version))
        return Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    @Test(
        "random origins and a tampered directory never make the cache answer with bytes not sent",
        arguments: [1, 2, 3, 4, 5, 6]
    )
    func neverAnswersWhatWasNotSent(seed: UInt64) async throws {
        let directory = try TemporaryDirectory()
        let clock = ManualWallClock()
        let ledger = Ledger()
        let behaviour = Mutex(SeededGenerator(seed: seed))
        let paths = (0..<6).map { "/r\($0)" }
        let origin = try await TestOrigin.start { request in
            let path = String(request.path?.split(separator: "?").first ?? "/")
            let version = ledger.version(path)
            let body = Self.body(path, version: version, size: path == "/r5" ? 150_000 : 2_000)
            let etag = "\"\(version)\""
            let choice = behaviour.withLock { Int.random(in: 0..<10, using: &$0) }
            if request.headerFields[.ifNoneMatch] == etag && choice < 6 {
                return .init(status: 304, fields: [("ETag", etag), ("Cache-Control", "max-age=5")])
            }
            switch choice {
            case 0:
                return .init(status: 302, fields: [("Location", paths[((paths.firstIndex(of: path) ?? 0) + 1) % 5])])
            case 1:
                // Cut short: only an error may come of it, never an answer.
                return .init(fields: [("Cache-Control", "max-age=60")], data: body, truncatedAfter: body.count / 2)
            case 2:
                return .init(status: 304, fields: [("Cache-Control", "max-age=60")])
            default:
                ledger.record(body, for: path)
                let cacheControl = choice == 3 ? "no-store" : "max-age=\(choice)"
                return .init(fields: [("Cache-Control", cacheControl), ("ETag", etag)], data: body)
            }
        }
        defer { origin.stop() }
        var random = SeededGenerator(seed: seed &* 7_919)
        func makeLoader() throws -> ResourceLoader {
            try ResourceLoader(
                configuration: .init(streamingThreshold: 64 << 10),
                transport: AsyncHTTPClientTransport(),
                disk: DiskCache(directory: directory.url, now: { clock.now }),
                now: { clock.now }
            )
        }
        var loader = try makeLoader()
        var answers = 0
        for _ in 0..<150 {
            let path = paths.randomElement(using: &random)!
            let policy: CachePolicy =
                Int.random(in: 0..<5, using: &random) == 0 ? .returnCacheDataDontLoad : .useProtocolCachePolicy
            if let answer = try? await loader.load(origin.url(path), policy: policy) {
                let answered = answer.redirects.last.map { String($0.path()) } ?? path
                if answer.source == .generated || !(200...299).contains(answer.response.status.code) {
                    #expect(answer.body.isEmpty || ledger.sent(answered).contains(answer.body))
                } else {
                    #expect(ledger.sent(answered).contains(answer.body), "\(path) → \(answered), \(answer.source)")
                    answers += 1
                }
            }
            switch Int.random(in: 0..<12, using: &random) {
            case 0: ledger.bump(path)
            case 1: clock.advance(by: Double(Int.random(in: 1...90, using: &random)))
            case 2:
                // Damage a file of the disk tier, and start again from the disk.
                await loader.waitForBackgroundWork()
                try Self.tamper(with: directory.path, using: &random)
                loader = try makeLoader()
            case 3:
                await loader.waitForBackgroundWork()
                loader = try makeLoader()
            default: break
            }
        }
        await loader.waitForBackgroundWork()
        #expect(answers > 30)
    }

    @Test(
        "cachalot processes killed at random moments, on a tampered directory, never answer bytes not sent",
        arguments: [1, 2, 3]
    )
    func killedProcesses(seed: UInt64) async throws {
        let tool = try CommandLineTool()
        let ledger = Ledger()
        let behaviour = Mutex(SeededGenerator(seed: seed))
        let paths = (0..<4).map { "/k\($0)" }
        let origin = try await TestOrigin.start { request in
            let path = request.path ?? "/"
            let version = ledger.version(path)
            // Large enough that a kill often lands while the body streams to a file.
            let body = Self.body(path, version: version, size: path == "/k3" ? 3 << 20 : 40_000)
            let choice = behaviour.withLock { Int.random(in: 0..<6, using: &$0) }
            if choice == 0 {
                return .init(fields: [("Cache-Control", "max-age=60")], data: body, truncatedAfter: body.count / 3)
            }
            ledger.record(body, for: path)
            return .init(fields: [("Cache-Control", "max-age=\(choice * 2)"), ("ETag", "\"\(version)\"")], data: body)
        }
        defer { origin.stop() }
        var random = SeededGenerator(seed: seed &* 104_729)
        let output = tool.directory.path + "/out"
        var (answers, kills) = (0, 0)
        for _ in 0..<24 {
            let path = paths.randomElement(using: &random)!
            let url = origin.url(path).absoluteString
            try? FileManager.default.removeItem(atPath: output)
            let child = try tool.start(["get", "-o", output, url], capturingOutput: false)
            if Bool.random(using: &random) {
                // Jitter, not a wait: spread the kills over every phase of a load.
                let clock = ContinuousClock()
                let deadline = clock.now.advanced(by: .microseconds(Int.random(in: 0...60_000, using: &random)))
                while clock.now < deadline {}
                child.send(SIGKILL)
            }
            let ending = await CommandLineTool.offThePool { child.waitForExit() }
            if ending.status == 128 + SIGKILL { kills += 1 }
            if ending.status == 0 {
                #expect(ledger.sent(path).contains(try Data(contentsOf: URL(fileURLWithPath: output))), "\(path)")
                answers += 1
            }
            switch Int.random(in: 0..<6, using: &random) {
            case 0: ledger.bump(path)
            case 1: try Self.tamper(with: tool.cache, using: &random)
            default: break
            }
            // What a later process finds stored, if anything, is what the origin sent.
            let stored = tool.directory.path + "/stored"
            try? FileManager.default.removeItem(atPath: stored)
            let offline = try await tool.run(["get", "--offline", "-o", stored, url])
            #expect(offline.status == 0 || offline.status == 4, "\(path): \(offline.errors)")
            if offline.status == 0 {
                #expect(ledger.sent(path).contains(try Data(contentsOf: URL(fileURLWithPath: stored))), "\(path)")
            }
        }
        #expect(answers > 5 && kills > 3)
    }

    /// Flips a byte of, cuts short, swaps or removes one entry file, or removes the journal.
    static func tamper(with root: String, using random: inout SeededGenerator) throws {
        let entries = root + "/entries"
        let files = (FileManager.default.subpaths(atPath: entries) ?? []).filter { $0.contains("/") }.map {
            "\(entries)/\($0)"
        }
        guard let victim = files.randomElement(using: &random) else { return }
        let contents = try Data(contentsOf: URL(fileURLWithPath: victim))
        switch Int.random(in: 0..<5, using: &random) {
        case 0 where !contents.isEmpty:
            var damaged = contents
            let offset = Int.random(in: 0..<contents.count, using: &random)
            damaged[offset] ^= UInt8.random(in: 1...255, using: &random)
            try damaged.write(to: URL(fileURLWithPath: victim))
        case 1:
            try contents.prefix(contents.count / 2).write(to: URL(fileURLWithPath: victim))
        case 2:
            if let other = files.randomElement(using: &random), other != victim {
                try Data(contentsOf: URL(fileURLWithPath: other)).write(to: URL(fileURLWithPath: victim))
            }
        case 3:
            try? FileManager.default.removeItem(atPath: root + "/journal")
        default:
            try FileManager.default.removeItem(atPath: victim)
        }
    }
}
