// swift-tools-version: 6.2
// libFuzzer targets for Cachalot's parsers of untrusted bytes: one executable a parser, each
// calling the same `FuzzTarget` entry point that the replay tests call. Build and run them with
// `Fuzz/run` (see README.md); users of Cachalot never resolve this package.
import PackageDescription

/// Each fuzzer's name (as `Fuzz/run` and the folders under Seeds/ and Regressions/ know it) and
/// the modules its entry point needs.
let fuzzers: [(name: String, modules: [String])] = [
    ("entry-file", ["Cachalot"]),
    ("journal", ["Cachalot"]),
    ("stored-response", ["Cachalot"]),
    ("cache-control", ["Cachalot"]),
    ("http-date", ["Cachalot"]),
    ("vary", ["Cachalot"]),
    ("image", ["Cachalot", "CachalotImages"]),
    ("origin-response", ["Cachalot", "CachalotNIO"]),
    ("request", ["Cachalot", "CachalotServer"]),
]

/// `entry-file` → `FuzzEntryFile`.
func targetName(_ name: String) -> String {
    "Fuzz" + name.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
}

let package = Package(
    name: "CachalotFuzz",
    platforms: [.macOS(.v15)],
    products: fuzzers.map { .executable(name: "fuzz-\($0.name)", targets: [targetName($0.name)]) },
    dependencies: [.package(name: "Cachalot", path: "..")],
    targets: fuzzers.map { fuzzer in
        .executableTarget(
            name: targetName(fuzzer.name),
            dependencies: fuzzer.modules.map { .product(name: $0, package: "Cachalot") },
            path: "Sources/\(fuzzer.name)",
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
                .treatAllWarnings(as: .error),
            ]
        )
    },
    swiftLanguageModes: [.v6]
)
