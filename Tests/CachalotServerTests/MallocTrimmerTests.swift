import CachalotServer
import CachalotTesting
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The malloc trimmer")
struct MallocTrimmerTests {
    /// Waits until `condition` holds, yielding; a time limit on the test ends the wait.
    static func waitUntil(_ condition: () -> Bool) async {
        while !condition(), !Task.isCancelled { await Task.yield() }
    }

    @Test("It trims once per interval, by its clock, and stops when cancelled", .timeLimit(.minutes(1)))
    func interval() async throws {
        let clock = ManualClock()
        let trims = Atomic(0)
        let trimmer = MallocTrimmer(interval: .seconds(10), clock: clock) { trims.add(1, ordering: .relaxed) }
        let running = Task { try await trimmer.run() }
        await Self.waitUntil { clock.sleeperCount == 1 }
        clock.advance(by: .seconds(9))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(1))
        await Self.waitUntil { trimmer.statistics.trims == 1 }
        await Self.waitUntil { clock.sleeperCount == 1 }
        #expect(trims.load(ordering: .relaxed) == 1)
        clock.advance(by: .seconds(10))
        await Self.waitUntil { trimmer.statistics.trims == 2 }
        await Self.waitUntil { clock.sleeperCount == 1 }
        running.cancel()
        // The manual clock's sleep does not end on cancellation: time moves it on.
        clock.advance(by: .seconds(10))
        try await running.value
        #expect(trims.load(ordering: .relaxed) == 2)
        #expect(trimmer.statistics.trims == 2)
    }

    #if canImport(Glibc)
    @Test("Its trim gives the system back free pages in the middle of a heap", .timeLimit(.minutes(1)))
    func givesBack() async throws {
        // 64 MiB in blocks of 64 KiB, below the mmap threshold, touched; all freed but the last,
        // which keeps the freed ones from the top of the heap (which glibc gives back by itself).
        let size = 64 << 10
        let blocks = (0..<1_024).map { _ in malloc(size)! }
        for block in blocks { memset(block, 1, size) }
        for block in blocks.dropLast() { free(block) }
        defer { free(blocks.last!) }
        let before = try Self.residentAnonymousBytes()
        let clock = ManualClock()
        let trimmer = MallocTrimmer(interval: .seconds(1), clock: clock)
        let running = Task { try await trimmer.run() }
        await Self.waitUntil { clock.sleeperCount == 1 }
        clock.advance(by: .seconds(1))
        await Self.waitUntil { trimmer.statistics.trims == 1 }
        let after = try Self.residentAnonymousBytes()
        await Self.waitUntil { clock.sleeperCount == 1 }
        running.cancel()
        clock.advance(by: .seconds(1))
        try await running.value
        #expect(before - after >= 32 << 20, "RssAnon went from \(before >> 20) to \(after >> 20) MiB")
    }

    /// RssAnon of this process, from /proc/self/status.
    static func residentAnonymousBytes() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("RssAnon:") })
        let kibibytes = try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
        return kibibytes << 10
    }
    #endif
}
