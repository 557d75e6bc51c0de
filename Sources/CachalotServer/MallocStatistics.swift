import CCachalotMalloc

/// What the C library's `malloc` holds now, from glibc's `mallinfo2()`: the bytes in use, and
/// the bytes it keeps free for later instead of giving them back to the system.
///
/// `cachalot serve` reports these on its admin listener's `/metrics`, beside the memory tier's
/// cost, so that a resident size above `--memory` can be told apart: entries that hold more
/// than they are counted for show as bytes in use, an allocator that keeps what was freed as
/// free bytes.
///
/// ```swift
/// if let malloc = MallocStatistics.current() {
///     print("in use \(malloc.inUseBytes), free \(malloc.freeBytes)")
/// }
/// ```
public struct MallocStatistics: Sendable, Hashable {
    /// Bytes allocated and not yet freed, in the arenas and in chunks mapped on their own.
    public var inUseBytes: Int
    /// Of ``inUseBytes``, those in chunks mapped on their own: each allocation at or above the
    /// mmap threshold, given back to the system when it is freed.
    public var mappedBytes: Int
    /// Bytes the arenas took from the system (the heap and each arena's mapped heaps), in use
    /// or free.
    public var arenaBytes: Int
    /// Bytes free inside the arenas, kept for later allocations. A trim gives the system back
    /// the whole pages among them (they leave the resident size), but they still count here.
    public var freeBytes: Int

    /// Creates statistics from their parts.
    public init(inUseBytes: Int, mappedBytes: Int, arenaBytes: Int, freeBytes: Int) {
        self.inUseBytes = inUseBytes
        self.mappedBytes = mappedBytes
        self.arenaBytes = arenaBytes
        self.freeBytes = freeBytes
    }

    /// The statistics now, or `nil` where the C library is not glibc (macOS, musl).
    ///
    /// - Complexity: O(*n*) in the free chunks of every arena, each arena walked under its lock:
    ///   for a scrape every few seconds, not for a hot path.
    public static func current() -> MallocStatistics? {
        let statistics = cachalot_malloc_read_statistics()
        guard statistics.isAvailable != 0 else { return nil }
        return MallocStatistics(
            inUseBytes: Int(statistics.inUseBytes + statistics.mappedBytes),
            mappedBytes: Int(statistics.mappedBytes),
            arenaBytes: Int(statistics.arenaBytes),
            freeBytes: Int(statistics.freeBytes)
        )
    }
}
