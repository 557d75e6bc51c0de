import CachalotImages
import Foundation
import Testing

/// Images for tests: committed fixtures, and bitmaps made here.
enum Images {
    /// The bytes of a committed fixture (see Fixtures/make-fixtures.py).
    static func fixture(_ name: String) throws -> Data {
        let url = try #require(Bundle.module.resourceURL).appending(path: "Fixtures/\(name)")
        return try Data(contentsOf: url)
    }

    /// A channel of the fixtures' PNG pattern: 0 red, 1 green, 2 blue, 3 alpha.
    static func value(_ x: Int, _ y: Int, _ channel: Int) -> UInt8 {
        UInt8([x * 18, y * 25, 150 - x * 10 - y * 5, 30 + x * 10 + y * 5][channel])
    }

    /// The color of block (bx, by) of the fixtures' JPEGs (8 × 8 blocks).
    static func block(_ bx: Int, _ by: Int) -> [UInt8] {
        [UInt8(bx * 60 + 20), UInt8(by * 90 + 20), UInt8(200 - bx * 40)]
    }

    /// A bitmap whose pixel (x, y) is `color(x, y)`.
    static func bitmap(
        width: Int,
        height: Int,
        format: Bitmap.PixelFormat = .rgba8,
        _ color: (Int, Int) -> [UInt8]
    ) -> Bitmap {
        var pixels = Data(capacity: width * height * format.bytesPerPixel)
        for y in 0..<height {
            for x in 0..<width { pixels.append(contentsOf: color(x, y)) }
        }
        return Bitmap(width: width, height: height, format: format, pixels: pixels)
    }

    /// A photo-like RGBA bitmap: smooth gradients with a little deterministic texture, which
    /// JPEG compresses as it does photos.
    static func photo(width: Int, height: Int) -> Bitmap {
        Self.bitmap(width: width, height: height) { x, y in
            let texture = (x &* 7 &+ y &* 13) % 17
            return [
                UInt8((x * 255 / width + texture) % 256), UInt8((y * 255 / height + texture) % 256),
                UInt8(((x + y) * 127 / (width + height) + 64) % 256), 255,
            ]
        }
    }

    /// Whether every channel of `actual` is within `tolerance` of `expected`.
    static func close(_ actual: [UInt8], _ expected: [UInt8], _ tolerance: Int) -> Bool {
        actual.count == expected.count && zip(actual, expected).allSatisfy { abs(Int($0) - Int($1)) <= tolerance }
    }
}
