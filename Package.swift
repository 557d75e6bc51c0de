// swift-tools-version: 6.2
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .treatAllWarnings(as: .error),
]

let package = Package(
    name: "Cachalot",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "Cachalot", targets: ["Cachalot"]),
        .library(name: "CachalotTesting", targets: ["CachalotTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    ],
    targets: [
        .target(
            name: "Cachalot",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "CachalotTesting",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "CachalotTestWorker",
            dependencies: ["Cachalot", "CachalotTesting"],
            path: "Tests/CachalotTestWorker",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CachalotTests",
            dependencies: [
                "Cachalot",
                "CachalotTesting",
                "CachalotTestWorker",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
