// swift-tools-version: 6.2
import PackageDescription

// The parent package's identity is the name of the directory it was cloned into.
let cachalot = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "cachalot").lowercased()

let package = Package(
    name: "CachalotBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "..")
    ],
    targets: [
        .executableTarget(
            name: "HitRatio",
            dependencies: [
                .product(name: "Cachalot", package: cachalot),
                .product(name: "CachalotTesting", package: cachalot),
            ],
            path: "Sources/HitRatio"
        )
    ],
    swiftLanguageModes: [.v6]
)
