import CachalotServer
import Testing

@Suite("malloc's tuning")
struct MallocTuningTests {
    @Test(
        "With no glibc variable set, serve's tuning sets 2 arenas, a 128 KiB mmap threshold and a 1 MiB trim threshold"
    )
    func serverDefaults() {
        #expect(
            MallocTuning.server.settings(environment: [:]) == [
                .arenaLimit(2), .mmapThreshold(131_072), .trimThreshold(1_048_576),
            ]
        )
        #expect(MallocTuning.server.settings(environment: ["MALLOC_ARENA_MAX": ""]).count == 3)
        #expect(
            MallocTuning.server.settings(environment: [:]).map(\.description) == [
                "MALLOC_ARENA_MAX=2", "MALLOC_MMAP_THRESHOLD_=131072", "MALLOC_TRIM_THRESHOLD_=1048576",
            ]
        )
    }

    @Test(
        "A setting the environment makes itself is left to it",
        arguments: [
            (["MALLOC_ARENA_MAX": "8"], [MallocTuning.Setting.mmapThreshold(131_072), .trimThreshold(1_048_576)]),
            (["MALLOC_MMAP_THRESHOLD_": "65536"], [.arenaLimit(2), .trimThreshold(1_048_576)]),
            (["MALLOC_TRIM_THRESHOLD_": "131072"], [.arenaLimit(2), .mmapThreshold(131_072)]),
            (["GLIBC_TUNABLES": "glibc.malloc.arena_max=4"], [.mmapThreshold(131_072), .trimThreshold(1_048_576)]),
            (["GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1:glibc.malloc.mmap_threshold=4096"], [.arenaLimit(2)]),
            (["MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "1", "MALLOC_TRIM_THRESHOLD_": "1"], []),
        ]
    )
    func environmentWins(environment: [String: String], expected: [MallocTuning.Setting]) {
        #expect(MallocTuning.server.settings(environment: environment) == expected)
    }

    @Test("A tuning without settings sets nothing")
    func empty() {
        #expect(MallocTuning().settings(environment: [:]).isEmpty)
    }

    #if canImport(Glibc)
    @Test("glibc takes the settings; a threshold that does not fit in a C int is refused")
    func applied() {
        // The test process's own allocator: values glibc's defaults allow too.
        #expect(
            MallocTuning(arenaLimit: 16, mmapThreshold: 128 << 10, trimThreshold: 128 << 10)
                .apply(environment: [:]).count == 3
        )
        #expect(MallocTuning(mmapThreshold: Int(Int32.max) + 1).apply(environment: [:]).isEmpty)
        #expect(MallocTuning(trimThreshold: Int(Int32.max) + 1).apply(environment: [:]).isEmpty)
    }
    #endif
}
