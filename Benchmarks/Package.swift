// swift-tools-version: 6.2
import PackageDescription

// The parent package's identity is the name of the directory it was cloned into.
let cachalot = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "cachalot").lowercased()

let package = Package(
    name: "CachalotBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "HitRatio",
            dependencies: [
                .product(name: "Cachalot", package: cachalot),
                .product(name: "CachalotTesting", package: cachalot),
            ],
            path: "Sources/HitRatio"
        ),
        .executableTarget(
            name: "MemoryCacheBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Cachalot", package: cachalot),
                .product(name: "CachalotTesting", package: cachalot),
            ],
            path: "Benchmarks/MemoryCache",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
