import CachalotTesting
import Foundation
import Testing

@testable import CachalotImages

@Suite("Decoding PNG and JPEG")
struct DecodingTests {
    let decoder = ImageDecoder()

    @Test(
        "every kind of PNG decodes to its pixels: interlaced RGBA, 16-bit RGB and gray, gray with alpha, palette with transparency",
        arguments: [
            ("interlaced-rgba.png", [0, 1, 2, 3]), ("rgb16.png", [0, 1, 2, -1]), ("gray16.png", [0]),
            ("gray-alpha.png", [0, 0, 0, 3]), ("palette.png", [0, 1, 2, 3]),
        ]
    )
    func pngKinds(name: String, channels: [Int]) throws {
        let bitmap = try self.decoder.decode(Images.fixture(name))
        #expect(bitmap.width == 8 && bitmap.height == 6)
        #expect(bitmap.format == (channels.count == 1 ? .gray8 : .rgba8))
        #expect(bitmap.cost == bitmap.bytesPerRow * 6)
        for y in 0..<6 {
            for x in 0..<8 {
                // -1: no alpha in the file, so opaque.
                let expected = channels.map { $0 < 0 ? 255 : Images.value(x, y, $0) }
                #expect(bitmap.pixel(x: x, y: y) == expected, "\(name) at (\(x), \(y))")
            }
        }
    }

    @Test("a 1-bit gray PNG expands to 0 and 255")
    func oneBitGray() throws {
        let bitmap = try self.decoder.decode(Images.fixture("gray1.png"))
        #expect(bitmap.format == .gray8)
        #expect(bitmap.pixel(x: 0, y: 0) == [0] && bitmap.pixel(x: 1, y: 0) == [255] && bitmap.pixel(x: 1, y: 1) == [0])
    }

    @Test("progressive and gray JPEGs decode to their colors, within JPEG's error")
    func jpegKinds() throws {
        let color = try self.decoder.decode(Images.fixture("progressive.jpg"))
        let gray = try self.decoder.decode(Images.fixture("gray.jpg"))
        #expect(color.format == .rgba8 && gray.format == .gray8)
        #expect(color.width == 32 && color.height == 24 && gray.width == 32)
        for by in 0..<3 {
            for bx in 0..<4 {
                let expected = Images.block(bx, by)
                #expect(Images.close(color.pixel(x: bx * 8 + 4, y: by * 8 + 4), expected + [255], 6))
                // ITU-R BT.601 luma, as JPEG's gray.
                let luma = (299 * Int(expected[0]) + 587 * Int(expected[1]) + 114 * Int(expected[2])) / 1000
                #expect(Images.close(gray.pixel(x: bx * 8 + 4, y: by * 8 + 4), [UInt8(luma)], 6))
            }
        }
    }

    @Test("the encoders' output decodes back: PNG exactly, JPEG within its error, RGBA and gray")
    func roundTrips() throws {
        let photo = Images.photo(width: 64, height: 48)
        #expect(try self.decoder.decode(ImageEncoder.png(photo)) == photo)
        let gray = Images.bitmap(width: 20, height: 10, format: .gray8) { x, y in [UInt8(x * 12 + y)] }
        #expect(try self.decoder.decode(ImageEncoder.png(gray)) == gray)
        let flat = Images.bitmap(width: 16, height: 16) { _, _ in [200, 100, 50, 255] }
        let jpeg = try ImageEncoder.jpeg(flat, quality: 95)
        #expect(ImageFormat(sniffing: jpeg) == .jpeg)
        let decoded = try self.decoder.decode(jpeg)
        #expect(Images.close(decoded.pixel(x: 7, y: 7), [200, 100, 50, 255], 3))
    }

    @Test("a JPEG decodes at 1/2, 1/4 or 1/8 inside the decoder, never below the scale asked for")
    func scaledJPEG() throws {
        let jpeg = try ImageEncoder.jpeg(Images.photo(width: 800, height: 600))
        #expect(try self.decoder.size(of: jpeg) == (800, 600))
        for (scale, width) in [(1.0, 800), (0.6, 800), (0.5, 400), (0.2, 200), (0.125, 100), (0.01, 100)] {
            let bitmap = try self.decoder.decode(jpeg, scale: scale)
            #expect(bitmap.width == width && bitmap.height == width * 3 / 4, "scale \(scale)")
        }
        // A PNG is shrunk by a whole factor as it decodes, leaving twice the scale: 40 / 5.
        let png = try ImageEncoder.png(Images.photo(width: 40, height: 30))
        #expect(try self.decoder.decode(png, scale: 0.1).width == 8)
    }

    @Test(
        "a PNG or GIF is shrunk as it is decoded: the box mean of its full decode, colors weighted by alpha",
        arguments: [
            "palette.png", "gray1.png", "gray16.png", "gray-alpha.png", "rgb16.png", "interlaced-rgba.png",
            "still-interlaced.gif", "clipped.gif", "animated.gif",
        ]
    )
    func shrunkWhileDecoding(name: String) throws {
        let data = try Images.fixture(name)
        let whole = try self.decoder.decode(data)
        // Scales of 1/4 and above leave the image whole, as the resampler's own reduction would.
        #expect(try self.decoder.decode(data, scale: 0.26) == whole)
        for factor in [2, 3, 5, 16] {
            // A scale a little under 1 / (2 × factor): the factor leaves at least twice the scale.
            let shrunk = try self.decoder.decode(data, scale: 1 / (2 * Double(factor) + 0.5))
            #expect(shrunk == Self.boxMean(whole, factor), "\(name) by \(factor)")
        }
    }

    /// `bitmap` shrunk by `factor`: each pixel the rounded mean of its block, RGBA colors weighted
    /// by alpha.
    static func boxMean(_ bitmap: Bitmap, _ factor: Int) -> Bitmap {
        let rgba = bitmap.format == .rgba8
        var pixels = Data()
        for top in stride(from: 0, to: bitmap.height, by: factor) {
            for left in stride(from: 0, to: bitmap.width, by: factor) {
                var sums = [0, 0, 0, 0]
                var count = 0
                for y in top..<min(top + factor, bitmap.height) {
                    for x in left..<min(left + factor, bitmap.width) {
                        let pixel = bitmap.pixel(x: x, y: y).map(Int.init)
                        let weight = rgba ? pixel[3] : 1
                        for channel in pixel.indices { sums[channel] += pixel[channel] * (channel < 3 ? weight : 1) }
                        count += 1
                    }
                }
                let alpha = sums[3]
                pixels +=
                    rgba
                    ? (0..<3).map { alpha == 0 ? 0 : UInt8((sums[$0] + alpha / 2) / alpha) }
                        + [UInt8((alpha + count / 2) / count)]
                    : [UInt8((sums[0] + count / 2) / count)]
            }
        }
        let width = (bitmap.width + factor - 1) / factor
        return Bitmap(
            width: width,
            height: pixels.count / (width * (rgba ? 4 : 1)),
            format: bitmap.format,
            pixels: pixels
        )
    }

    @Test("at 1/8 a progressive JPEG is decoded without the AC scans it ignores, to the same pixels")
    func progressiveEighth() throws {
        let color = Images.photo(width: 640, height: 480)
        let gray = Images.bitmap(width: 640, height: 480, format: .gray8) { x, y in
            [UInt8((x * 255 / 640 + (x &* 7 &+ y &* 13) % 17) % 256)]
        }
        // Gray: only the DC scans are kept. Color (chroma subsampled 2 × 2): the chroma AC scans too.
        for (bitmap, share) in [(gray, 0.25), (color, 0.5)] {
            let progressive = try ImageEncoder.jpeg(bitmap, progressive: true)
            let baseline = try ImageEncoder.jpeg(bitmap)
            // The decoder is given a part of the file; a baseline JPEG has nothing to leave out.
            let scans = try #require(JPEGScans.withoutACScans(progressive))
            #expect(Double(scans.count) < Double(progressive.count) * share)
            #expect(JPEGScans.withoutACScans(baseline) == nil)
            // The two encodings hold the same coefficients, and the baseline one is decoded whole.
            let fromScans = try self.decoder.decode(progressive, scale: 0.125)
            let whole = try self.decoder.decode(baseline, scale: 0.125)
            #expect(fromScans.width == 80 && fromScans.height == 60 && fromScans.format == whole.format)
            #expect(fromScans == whole, "\(bitmap.format)")
            // At 1/4 every scan counts: the same pixels as the baseline encoding's, exactly.
            #expect(try self.decoder.decode(progressive, scale: 0.25) == self.decoder.decode(baseline, scale: 0.25))
        }
    }

    @Test("a progressive JPEG with restart markers in its scans is also decoded at 1/8 without its AC scans")
    func progressiveWithRestarts() throws {
        // Pillow's files (make-fixtures.py): the same picture and coefficients, progressive with
        // a restart marker every 3 blocks, and baseline.
        let progressive = try Images.fixture("progressive-restarts.jpg")
        let baseline = try Images.fixture("baseline.jpg")
        let scans = try #require(JPEGScans.withoutACScans(progressive))
        #expect(scans.count < progressive.count)
        #expect(try self.decoder.decode(progressive, scale: 0.125) == self.decoder.decode(baseline, scale: 0.125))
    }

    @Test("a progressive JPEG cut short is a truncation at 1/8 too, not a thumbnail of its first scans")
    func truncatedProgressive() throws {
        let progressive = try ImageEncoder.jpeg(Images.photo(width: 640, height: 480), progressive: true)
        for fraction in [0.9, 0.5] {
            let cut = progressive.prefix(Int(Double(progressive.count) * fraction))
            #expect(JPEGScans.withoutACScans(cut) == nil)
            #expect { _ = try self.decoder.decode(cut, scale: 0.125) } throws: {
                ($0 as? ImageError)?.code == .truncated
            }
        }
    }

    @Test("the EXIF orientation of a JPEG is applied: 6 turns it a quarter clockwise")
    func exifOrientation() throws {
        // Left half red, right half blue, 32 × 16.
        let bitmap = Images.bitmap(width: 32, height: 16) { x, _ in x < 16 ? [255, 0, 0, 255] : [0, 0, 255, 255] }
        let jpeg = try ImageEncoder.jpeg(bitmap, quality: 95)
        let rotated = try self.decoder.decode(Self.withOrientation(6, jpeg))
        #expect(rotated.width == 16 && rotated.height == 32)
        #expect(try self.decoder.size(of: Self.withOrientation(6, jpeg)) == (16, 32))
        // Turned clockwise, the left (red) half is on top.
        #expect(Images.close(rotated.pixel(x: 8, y: 4), [255, 0, 0, 255], 40))
        #expect(Images.close(rotated.pixel(x: 8, y: 28), [0, 0, 255, 255], 40))
        let mirrored = try self.decoder.decode(Self.withOrientation(2, jpeg))
        #expect(mirrored.width == 32 && Images.close(mirrored.pixel(x: 4, y: 8), [0, 0, 255, 255], 40))
    }

    /// `jpeg` with an APP1 Exif segment saying `orientation`, right after its start marker.
    static func withOrientation(_ orientation: UInt8, _ jpeg: Data) -> Data {
        // Big-endian TIFF: header, one directory of one entry (0x0112, SHORT, 1, value).
        let tiff: [UInt8] = [
            0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, orientation, 0, 0, 0, 0, 0, 0,
        ]
        let body = Array("Exif\0\0".utf8) + tiff
        let length = body.count + 2
        let segment: [UInt8] = [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + body
        return Data(jpeg.prefix(2) + segment + jpeg.dropFirst(2))
    }

    @Test("data that is not PNG or JPEG, truncated, damaged or CMYK is a clear error")
    func badData() throws {
        let png = try ImageEncoder.png(Images.photo(width: 64, height: 48))
        let jpeg = try ImageEncoder.jpeg(Images.photo(width: 64, height: 48))
        let cases: [(Data, ImageError.Code)] = [
            (Data("RIFF\0\0\0\0WAVE".utf8), .unknownFormat),
            (png.prefix(png.count / 2), .truncated),
            (jpeg.prefix(jpeg.count / 2), .truncated),
            (png.prefix(4), .unknownFormat),
            (Self.damaged(png, at: 40), .corrupt),
            (try Images.fixture("cmyk.jpg"), .unsupported),
        ]
        for (data, code) in cases {
            #expect {
                _ = try self.decoder.decode(data)
            } throws: { error in
                (error as? ImageError)?.code == code && !((error as? ImageError)?.message.isEmpty ?? true)
            }
        }
    }

    @Test("a header declaring more pixels than the limit is refused before the pixels are allocated")
    func decompressionBombs() throws {
        let bomb = Self.pngHeader(width: 100_000, height: 100_000)
        #expect { _ = try self.decoder.decode(bomb) } throws: { ($0 as? ImageError)?.code == .tooLarge }
        #expect(try self.decoder.size(of: bomb) == (100_000, 100_000))
        var jpeg = try ImageEncoder.jpeg(Images.photo(width: 16, height: 16))
        // The start-of-frame's height and width, after its marker, length and precision.
        let frame = try #require(jpeg.firstRange(of: Data([0xFF, 0xC0]))).lowerBound
        jpeg.replaceSubrange(frame + 5..<frame + 9, with: [0xEA, 0x60, 0xEA, 0x60])  // 60000 × 60000
        #expect { _ = try self.decoder.decode(jpeg) } throws: { ($0 as? ImageError)?.code == .tooLarge }
        let small = ImageDecoder(maximumPixelCount: 100)
        #expect { _ = try small.decode(ImageEncoder.png(Images.photo(width: 11, height: 10))) } throws: {
            ($0 as? ImageError)?.code == .tooLarge
        }
    }

    @Test("randomly damaged and cut PNGs and JPEGs never crash the decoder")
    func randomCorruption() throws {
        var random = SeededGenerator(seed: 42)
        let sources = [
            try ImageEncoder.png(Images.photo(width: 40, height: 30)),
            try ImageEncoder.jpeg(Images.photo(width: 40, height: 30)),
            try ImageEncoder.jpeg(Images.photo(width: 40, height: 30), progressive: true),
            try Images.fixture("progressive.jpg"), try Images.fixture("interlaced-rgba.png"),
            try Images.fixture("palette.png"),
        ]
        var outcomes = [String: Int]()
        for round in 0..<1_500 {
            var data = sources[round % sources.count]
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                let index = data.startIndex + Int.random(in: 0..<data.count, using: &random)
                data[index] = UInt8.random(in: 0...255, using: &random)
            }
            if Bool.random(using: &random) { data = data.prefix(Int.random(in: 0...data.count, using: &random)) }
            do {
                let bitmap = try self.decoder.decode(data, scale: [1, 0.25, 0.125][round % 3])
                #expect(bitmap.pixels.count == bitmap.cost)
                outcomes["decoded", default: 0] += 1
            } catch {
                outcomes["\(error.code)", default: 0] += 1
            }
        }
        // Some damage is harmless and some is not: both outcomes must have come up.
        #expect(outcomes["decoded", default: 0] > 0 && outcomes.count >= 3)
    }

    /// `data` with one byte changed at `offset`.
    static func damaged(_ data: Data, at offset: Int) -> Data {
        var data = data
        data[data.startIndex + offset] ^= 0xFF
        return data
    }

    /// A PNG of a signature, an IHDR chunk declaring `width` × `height` RGBA, the start of an
    /// IDAT chunk, and IEND: a header that promises much and holds nothing.
    static func pngHeader(width: UInt32, height: UInt32) -> Data {
        func chunk(_ type: String, _ body: [UInt8]) -> [UInt8] {
            let typed = Array(type.utf8) + body
            return Self.bigEndian(UInt32(body.count)) + typed + Self.bigEndian(Self.crc32(typed))
        }
        let header = Self.bigEndian(width) + Self.bigEndian(height) + [8, 6, 0, 0, 0]
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        return Data(signature + chunk("IHDR", header) + chunk("IDAT", [0x78, 0x9C]) + chunk("IEND", []))
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// CRC-32 as PNG computes it.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
