// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "CachalotBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Cachalot", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .executableTarget(
            name: "HitRatio",
            dependencies: [
                .product(name: "Cachalot", package: "Cachalot"),
                .product(name: "CachalotTesting", package: "Cachalot"),
            ],
            path: "Sources/HitRatio"
        ),
        .executableTarget(
            name: "MemoryCacheBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Cachalot", package: "Cachalot"),
                .product(name: "CachalotTesting", package: "Cachalot"),
            ],
            path: "Benchmarks/MemoryCache",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "DiskCacheBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Cachalot", package: "Cachalot"),
                .product(name: "CachalotTesting", package: "Cachalot"),
            ],
            path: "Benchmarks/DiskCache",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "LoaderBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Cachalot", package: "Cachalot"),
                .product(name: "CachalotAsyncHTTPClient", package: "Cachalot"),
                .product(name: "CachalotTestOrigin", package: "Cachalot"),
                .product(name: "CachalotTesting", package: "Cachalot"),
            ],
            path: "Benchmarks/Loader",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "ImageBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "CachalotImages", package: "Cachalot"),
            ],
            path: "Benchmarks/Images",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "ThumbnailTimer",
            dependencies: [.product(name: "CachalotImages", package: "Cachalot")],
            path: "Sources/ThumbnailTimer"
        ),
        .executableTarget(
            name: "VariantSizes",
            dependencies: [.product(name: "CachalotImages", package: "Cachalot")],
            path: "Sources/VariantSizes"
        ),
        .executableTarget(
            name: "SharedTierTimer",
            dependencies: [
                .product(name: "Cachalot", package: "Cachalot"),
                .product(name: "CachalotAsyncHTTPClient", package: "Cachalot"),
                .product(name: "CachalotPostgres", package: "Cachalot"),
                .product(name: "CachalotTestOrigin", package: "Cachalot"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Sources/SharedTierTimer"
        ),
    ],
    swiftLanguageModes: [.v6]
)
