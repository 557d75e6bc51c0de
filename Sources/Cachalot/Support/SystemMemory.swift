import Foundation

/// How much memory this process may use, for sizing default cache limits.
enum SystemMemory {
    /// The memory available to this process in bytes: physical memory, lowered to the cgroup
    /// limit when the process runs in a container that sets one.
    static let available: UInt64 = {
        let physical = ProcessInfo.processInfo.physicalMemory
        guard let limit = cgroupLimit() else { return physical }
        return min(physical, limit)
    }()

    /// The default cost limit of a memory cache for a machine with `memory` bytes: 20 % of it,
    /// or 10 % on machines with 512 MiB or less, and never more than ``defaultCostLimitCap``.
    static func defaultCostLimit(forAvailableMemory memory: UInt64) -> Int {
        let share: UInt64 = memory <= 512 << 20 ? 10 : 20
        let limit = memory / 100 * share
        return Int(min(limit, UInt64(defaultCostLimitCap)))
    }

    /// The upper cap of the default cost limit: 512 MiB.
    static let defaultCostLimitCap = 512 << 20

    /// Reads the memory limit of the cgroup (v2, then v1) that holds this process.
    private static func cgroupLimit() -> UInt64? {
        #if os(Linux)
        for path in ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"] {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            // "max" (v2) or a huge number (v1) mean no limit.
            if let value = UInt64(text.trimmingCharacters(in: .whitespacesAndNewlines)), value < 1 << 60 {
                return value
            }
        }
        #endif
        return nil
    }
}
