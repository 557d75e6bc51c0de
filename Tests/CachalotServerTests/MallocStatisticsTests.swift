import CachalotServer
import Testing

#if canImport(Glibc)
import Glibc

@Suite("malloc's statistics")
struct MallocStatisticsTests {
    @Test("A large block counts as mapped and in use while it is held, and leaves both when freed")
    func largeBlock() throws {
        // 64 MiB is above the most that glibc's own threshold rises to (32 MiB), and above 128 KiB: mapped
        // on its own unless a test sets a higher threshold, which none does.
        let size = 64 << 20
        let before = try #require(MallocStatistics.current())
        let block = try #require(malloc(size))
        memset(block, 1, size)
        let held = try #require(MallocStatistics.current())
        free(block)
        let after = try #require(MallocStatistics.current())
        // The figures are the whole process's: other threads of the test run allocate and free
        // meanwhile (CI saw 20 KiB less than the block). 4 MiB of slack still tells a 64 MiB
        // block counted from one not counted.
        let slack = 4 << 20
        #expect(held.mappedBytes - before.mappedBytes >= size - slack)
        #expect(held.inUseBytes - before.inUseBytes >= size - slack)
        #expect(held.mappedBytes - after.mappedBytes >= size - slack)
        #expect(held.inUseBytes - after.inUseBytes >= size - slack)
    }

    @Test("Small blocks freed count as free in the arenas, not in use")
    func freedSmallBlocks() throws {
        // 4,096 blocks of 16 KiB, below any mmap threshold; the last one stays, so that the
        // freed ones are not at the top of the heap, which glibc would give back at once.
        let blocks = (0..<4_096).map { _ in malloc(16 << 10)! }
        for block in blocks { memset(block, 1, 16 << 10) }
        let held = try #require(MallocStatistics.current())
        for block in blocks.dropLast() { free(block) }
        let freed = try #require(MallocStatistics.current())
        free(blocks.last!)
        #expect(held.inUseBytes - freed.inUseBytes >= 60 << 20)
        #expect(freed.freeBytes - held.freeBytes >= 60 << 20)
        #expect(freed.arenaBytes >= freed.freeBytes)
    }
}
#endif
