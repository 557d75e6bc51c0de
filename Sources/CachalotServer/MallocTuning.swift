import CCachalotMalloc

/// How a long-running server sets up glibc's `malloc` at its start: how many arenas it keeps,
/// from what size an allocation is mapped on its own, and how much free memory a heap keeps at
/// its top.
///
/// glibc's defaults suit short programs: up to 8 arenas per core, each holding on to the memory
/// its threads freed, and an mmap threshold that rises (up to 32 MiB) each time a mapped chunk
/// is freed, after which large allocations come from the arenas too, where they leave holes.
/// A proxy that stores and evicts bodies of many sizes, on threads that take turns, then holds
/// far more than it uses. And a heap gives back the free memory at its top as soon as it
/// exceeds 128 KiB: a server that copies a large body into buffers for the socket, frees them,
/// and allocates them again for the next request pays the page faults of fresh memory each
/// time. See docs/serve.md, "Memory".
///
/// glibc's own environment variables win: a setting whose variable is set (`MALLOC_ARENA_MAX`,
/// `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, or its `GLIBC_TUNABLES` entry) is left
/// to it, so that an operator can change it without a new build.
///
/// ```swift
/// MallocTuning.server.apply()  // first thing in main, before other threads allocate
/// ```
public struct MallocTuning: Sendable, Hashable {
    /// The most arenas malloc keeps; `nil` leaves glibc's limit (8 per core). Arenas made
    /// before ``apply(environment:)`` stay. Default: `nil`.
    public var arenaLimit: Int?
    /// Allocations of at least this many bytes are mapped on their own and unmapped when freed,
    /// and the threshold stays where it is set; `nil` leaves glibc's, which starts at 128 KiB
    /// and rises. Default: `nil`.
    public var mmapThreshold: Int?
    /// The free memory at the top of a heap is given back to the system once it exceeds this
    /// many bytes; `nil` leaves glibc's 128 KiB. Default: `nil`.
    public var trimThreshold: Int?

    /// Creates a tuning; each parameter sets the property of the same name.
    public init(arenaLimit: Int? = nil, mmapThreshold: Int? = nil, trimThreshold: Int? = nil) {
        self.arenaLimit = arenaLimit
        self.mmapThreshold = mmapThreshold
        self.trimThreshold = trimThreshold
    }

    /// What `cachalot serve` uses: 2 arenas, an mmap threshold fixed at 128 KiB, and a trim
    /// threshold of 1 MiB (each arena keeps up to 1 MiB free at its top, besides what the
    /// periodic ``MallocTrimmer`` gives back).
    public static let server = MallocTuning(arenaLimit: 2, mmapThreshold: 128 << 10, trimThreshold: 1 << 20)

    /// One setting, as ``settings(environment:)`` lists it.
    public enum Setting: Sendable, Hashable, CustomStringConvertible {
        /// At most this many arenas (`M_ARENA_MAX`).
        case arenaLimit(Int)
        /// Allocations of at least this many bytes mapped on their own (`M_MMAP_THRESHOLD`).
        case mmapThreshold(Int)
        /// Free memory at a heap's top kept up to this many bytes (`M_TRIM_THRESHOLD`).
        case trimThreshold(Int)

        /// The setting as glibc's variable would spell it, such as `MALLOC_ARENA_MAX=2`.
        public var description: String {
            switch self {
            case .arenaLimit(let count): "MALLOC_ARENA_MAX=\(count)"
            case .mmapThreshold(let bytes): "MALLOC_MMAP_THRESHOLD_=\(bytes)"
            case .trimThreshold(let bytes): "MALLOC_TRIM_THRESHOLD_=\(bytes)"
            }
        }
    }

    /// The settings that ``apply(environment:)`` makes under `environment`: this tuning's, but
    /// for those the environment sets itself.
    public func settings(environment: [String: String]) -> [Setting] {
        let tunables = environment["GLIBC_TUNABLES"] ?? ""
        func isSet(_ variable: String, tunable: String) -> Bool {
            !(environment[variable] ?? "").isEmpty || tunables.contains("glibc.malloc.\(tunable)=")
        }
        var settings: [Setting] = []
        if let count = self.arenaLimit, !isSet("MALLOC_ARENA_MAX", tunable: "arena_max") {
            settings.append(.arenaLimit(count))
        }
        if let bytes = self.mmapThreshold, !isSet("MALLOC_MMAP_THRESHOLD_", tunable: "mmap_threshold") {
            settings.append(.mmapThreshold(bytes))
        }
        if let bytes = self.trimThreshold, !isSet("MALLOC_TRIM_THRESHOLD_", tunable: "trim_threshold") {
            settings.append(.trimThreshold(bytes))
        }
        return settings
    }

    /// Sets the process's `malloc` up (`mallopt`), but for what `environment` sets itself.
    ///
    /// Call it first thing, before other threads allocate: arenas they made stay.
    ///
    /// - Parameter environment: The process's environment, whose glibc variables win.
    /// - Returns: The settings the C library took; none where it is not glibc.
    @discardableResult
    public func apply(environment: [String: String]) -> [Setting] {
        self.settings(environment: environment).filter { setting in
            switch setting {
            case .arenaLimit(let count): cachalot_malloc_set_arena_limit(Int32(clamping: count)) == 1
            case .mmapThreshold(let bytes): cachalot_malloc_set_mmap_threshold(bytes) == 1
            case .trimThreshold(let bytes): cachalot_malloc_set_trim_threshold(bytes) == 1
            }
        }
    }
}
