import Benchmark
import CachalotImages
import Foundation

// Images: a 256-pixel thumbnail of a 4000 × 3000 JPEG against a full decode followed by the
// same resize, timed in one iteration in alternating order (the ratio's goal is at most 0.25,
// four times faster); and the decoders' throughput, from which report.py derives megapixels a
// second.

/// A 4000 × 3000 photo-like picture (gradients and texture), as JPEG at quality 90 (baseline and
/// progressive) and as PNG.
struct Fixtures: Sendable {
    let jpeg: Data
    let progressiveJPEG: Data
    let png: Data

    static let width = 4_000
    static let height = 3_000

    static func make() throws -> Fixtures {
        var pixels = Data(count: Self.width * Self.height * 4)
        pixels.withUnsafeMutableBytes { (bytes: UnsafeMutableRawBufferPointer) in
            for y in 0..<Self.height {
                for x in 0..<Self.width {
                    let texture = (x &* 7 &+ y &* 13 &+ (x * y) % 31) % 23
                    let offset = (y * Self.width + x) * 4
                    bytes[offset] = UInt8((x * 255 / Self.width + texture) % 256)
                    bytes[offset + 1] = UInt8((y * 255 / Self.height + texture) % 256)
                    bytes[offset + 2] = UInt8(((x + y) * 127 / (Self.width + Self.height) + 64 + texture) % 256)
                    bytes[offset + 3] = 255
                }
            }
        }
        let bitmap = Bitmap(width: Self.width, height: Self.height, format: .rgba8, pixels: pixels)
        return Fixtures(
            jpeg: try ImageEncoder.jpeg(bitmap, quality: 90),
            progressiveJPEG: try ImageEncoder.jpeg(bitmap, quality: 90, progressive: true),
            png: try ImageEncoder.png(bitmap)
        )
    }
}

nonisolated(unsafe) var fixtures: Fixtures?

func setUp() throws {
    if fixtures == nil { fixtures = try Fixtures.make() }
}

let thumbnail = Thumbnail(maximumPixelSize: 256)

/// What the pipeline does for a thumbnail: decode no larger than needed, then resize.
func makeThumbnail(_ data: Data) throws -> Bitmap {
    let decoder = ImageDecoder()
    let size = try decoder.size(of: data)
    let scale = thumbnail.requiredScale(sourceWidth: size.width, sourceHeight: size.height)
    return try thumbnail.process(decoder.decode(data, scale: scale))
}

let benchmarks: @Sendable () -> Void = {
    let ratio = BenchmarkMetric.custom("ratio × 1000", polarity: .prefersSmaller, useScalingFactor: false)
    // The goal's row is the baseline JPEG, as cameras write them; the progressive one, as many
    // web images are, is reported beside it.
    for progressive in [false, true] {
        nonisolated(unsafe) var iteration = 0
        Benchmark(
            "256-pixel thumbnail of a 4000x3000 \(progressive ? "progressive " : "")JPEG against a full decode"
                + " and resize, same iteration",
            configuration: .init(metrics: [ratio], warmupIterations: 1, maxDuration: .seconds(10), setup: setUp)
        ) { benchmark in
            let data = progressive ? fixtures!.progressiveJPEG : fixtures!.jpeg
            iteration += 1
            let clock = ContinuousClock()
            var (subject, baseline) = (Duration.zero, Duration.zero)
            let full = { blackHole(try thumbnail.process(ImageDecoder().decode(data))) }
            let scaled = { blackHole(try makeThumbnail(data)) }
            if iteration.isMultiple(of: 2) {
                baseline = try clock.measure(full)
                subject = try clock.measure(scaled)
            } else {
                subject = try clock.measure(scaled)
                baseline = try clock.measure(full)
            }
            benchmark.measurement(ratio, Int((subject / baseline * 1_000).rounded()))
        }
    }

    let decoding = Benchmark.Configuration(
        metrics: [.wallClock],
        warmupIterations: 1,
        maxDuration: .seconds(10),
        setup: setUp
    )
    Benchmark("decode a 4000x3000 JPEG (12 megapixels)", configuration: decoding) { _ in
        blackHole(try ImageDecoder().decode(fixtures!.jpeg))
    }
    Benchmark("decode a 4000x3000 PNG (12 megapixels)", configuration: decoding) { _ in
        blackHole(try ImageDecoder().decode(fixtures!.png))
    }
    Benchmark("256-pixel thumbnail of a 4000x3000 JPEG", configuration: decoding) { _ in
        blackHole(try makeThumbnail(fixtures!.jpeg))
    }
    Benchmark("256-pixel thumbnail of a 4000x3000 progressive JPEG", configuration: decoding) { _ in
        blackHole(try makeThumbnail(fixtures!.progressiveJPEG))
    }
}
