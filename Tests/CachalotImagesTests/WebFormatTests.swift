import Foundation
import Testing

@testable import CachalotImages

@Suite("Decoding and encoding WebP, AVIF and GIF")
struct WebFormatTests {
    let decoder = ImageDecoder()

    static let red: [UInt8] = [255, 0, 0, 255]
    static let green: [UInt8] = [0, 255, 0, 255]
    static let blue: [UInt8] = [0, 0, 255, 255]
    static let black: [UInt8] = [0, 0, 0, 255]
    static let clear: [UInt8] = [0, 0, 0, 0]

    @Test("formats are told by their first bytes: GIF, WebP, AVIF by its ftyp brands, not HEIC or a WAVE")
    func sniffing() throws {
        for (name, format) in [
            ("blocks.webp", ImageFormat.webp), ("animated.webp", .webp), ("blocks.avif", .avif),
            ("animated.gif", .gif), ("baseline.jpg", .jpeg), ("palette.png", .png),
        ] {
            #expect(ImageFormat(sniffing: try Images.fixture(name)) == format, "\(name)")
        }
        let box = { (brands: String) -> Data in
            let body = Array("ftyp".utf8) + Array(brands.utf8)
            return Data([0, 0, 0, UInt8(body.count + 4)] + body)
        }
        #expect(ImageFormat(sniffing: box("avif\0\0\0\0")) == .avif)
        #expect(ImageFormat(sniffing: box("mif1\0\0\0\0mif1avis")) == .avif)
        #expect(ImageFormat(sniffing: box("heic\0\0\0\0mif1heic")) == nil)
        // A brand past the box's own size does not count.
        #expect(ImageFormat(sniffing: box("mif1\0\0\0\0") + Data("avif".utf8)) == nil)
        #expect(ImageFormat(sniffing: Data("RIFF\0\0\0\0WAVEfmt ".utf8)) == nil)
        #expect(ImageFormat(sniffing: Data("GIF88a".utf8)) == nil)
        #expect(ImageFormat.jpeg.mediaType == "image/jpeg" && ImageFormat.avif.fileExtension == "avif")
    }

    @Test("a lossy WebP decodes to its colors, a lossless one with alpha to its exact pixels")
    func webp() throws {
        let lossy = try self.decoder.decode(Images.fixture("blocks.webp"))
        #expect(lossy.width == 32 && lossy.height == 24 && lossy.format == .rgba8)
        for by in 0..<3 {
            for bx in 0..<4 {
                #expect(Images.close(lossy.pixel(x: bx * 8 + 4, y: by * 8 + 4), Images.block(bx, by) + [255], 8))
            }
        }
        let lossless = try self.decoder.decode(Images.fixture("pattern-alpha.webp"))
        #expect(lossless.width == 8 && lossless.height == 6)
        for y in 0..<6 {
            for x in 0..<8 {
                #expect(lossless.pixel(x: x, y: y) == (0..<4).map { Images.value(x, y, $0) }, "(\(x), \(y))")
            }
        }
        #expect(try self.decoder.size(of: Images.fixture("blocks.webp")) == (32, 24))
    }

    @Test("a still WebP is scaled to the scale asked for, rounded up, as it is decoded; above 1/2, not at all")
    func scaledWebP() throws {
        let webp = try ImageEncoder.webp(Images.photo(width: 801, height: 600))
        #expect(try self.decoder.size(of: webp) == (801, 600))
        for (scale, width, height) in [
            (1.0, 801, 600), (0.6, 801, 600), (0.5, 401, 300), (0.2, 161, 120), (0.1, 81, 60), (0.0, 1, 1),
        ] {
            let bitmap = try self.decoder.decode(webp, scale: scale)
            #expect(bitmap.width == width && bitmap.height == height, "scale \(scale)")
        }
    }

    @Test("an AVIF decodes to its colors")
    func avif() throws {
        let avif = try Images.fixture("blocks.avif")
        #expect(try self.decoder.size(of: avif) == (32, 24))
        let bitmap = try self.decoder.decode(avif)
        #expect(bitmap.width == 32 && bitmap.height == 24 && bitmap.format == .rgba8)
        for by in 0..<3 {
            for bx in 0..<4 {
                #expect(Images.close(bitmap.pixel(x: bx * 8 + 4, y: by * 8 + 4), Images.block(bx, by) + [255], 10))
            }
        }
    }

    /// The AVIF fixtures whose blocks are turned by 'irot' and 'imir' (made by
    /// Fixtures/make-avif-transforms.c), their size as seen, and the stored block (bx, by) seen
    /// at each block (x, y) of the turned picture.
    static let turnedAVIFs: [(String, width: Int, height: Int, stored: @Sendable (Int, Int) -> (Int, Int))] = [
        // A quarter turn anticlockwise: the stored right column is the top row.
        ("blocks-irot1.avif", 24, 32, { x, y in (3 - y, x) }),
        // Mirrored: top and bottom exchanged.
        ("blocks-imir0.avif", 32, 24, { x, y in (x, 2 - y) }),
        // A quarter turn anticlockwise, then left and right exchanged (EXIF orientation 7).
        ("blocks-irot1-imir1.avif", 24, 32, { x, y in (3 - y, 2 - x) }),
    ]

    @Test("an AVIF's rotation and mirror properties are applied, to its size too", arguments: 0..<3)
    func turnedAVIF(index: Int) throws {
        let (name, width, height, stored) = Self.turnedAVIFs[index]
        let avif = try Images.fixture(name)
        #expect(try self.decoder.size(of: avif) == (width, height), "\(name)")
        let bitmap = try self.decoder.decode(avif)
        #expect(bitmap.width == width && bitmap.height == height, "\(name)")
        for y in 0..<height / 8 {
            for x in 0..<width / 8 {
                let (bx, by) = stored(x, y)
                let seen = bitmap.pixel(x: x * 8 + 4, y: y * 8 + 4)
                #expect(Images.close(seen, Images.block(bx, by) + [255], 10), "\(name): block (\(x), \(y)) is \(seen)")
            }
        }
    }

    @Test("an interlaced GIF decodes to its palette's colors, its transparent index clear")
    func stillGIF() throws {
        let bitmap = try self.decoder.decode(Images.fixture("still-interlaced.gif"))
        #expect(bitmap.width == 8 && bitmap.height == 6 && bitmap.format == .rgba8)
        #expect(try self.decoder.size(of: Images.fixture("still-interlaced.gif")) == (8, 6))
        for y in 0..<6 {
            for x in 0..<8 {
                #expect(bitmap.pixel(x: x, y: y) == [Self.red, Self.green, Self.blue, Self.clear][(x + y) % 4])
            }
        }
    }

    @Test("an animated GIF's frames are composited as browsers show them: disposal, transparency, delays, loops")
    func animatedGIF() throws {
        let data = try Images.fixture("animated.gif")
        let animation = try self.decoder.decodeAnimation(data)
        #expect(
            animation.frames.map(\.duration) == [
                .milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(300),
            ]
        )
        #expect(animation.loopCount == 0 && animation.duration == .milliseconds(650))
        #expect(animation.cost == 4 * 4 * 4 * 4)
        // (x, y) → color, for each frame: see make-fixtures.py.
        let hole = { (x: Int, y: Int) in (1...2).contains(x) && (1...2).contains(y) }
        let expected: [(Int, Int) -> [UInt8]] = [
            { _, _ in Self.red },
            { x, y in hole(x, y) ? Self.green : Self.red },
            // The blue frame's pixel in the hole is its transparent index: the hole shows through.
            { x, y in hole(x, y) ? Self.clear : x >= 2 && y >= 2 ? Self.blue : Self.red },
            { x, y in x == 0 && y == 0 ? Self.black : hole(x, y) ? Self.clear : Self.red },
        ]
        for (index, frame) in animation.frames.enumerated() {
            #expect(frame.bitmap.width == 4 && frame.bitmap.height == 4)
            for y in 0..<4 {
                for x in 0..<4 {
                    #expect(frame.bitmap.pixel(x: x, y: y) == expected[index](x, y), "frame \(index) at (\(x), \(y))")
                }
            }
        }
        // A still decode is the first frame.
        #expect(try self.decoder.decode(data) == animation.frames[0].bitmap)
    }

    @Test("frames are counted from a GIF's records and a WebP's chunks; a still is one; damage is an error")
    func frameCounts() throws {
        for (name, count) in [
            ("animated.gif", 4), ("animated.webp", 3), ("offset-frame.webp", 2), ("clipped.gif", 1),
            ("blocks.webp", 1), ("blocks.avif", 1), ("palette.png", 1), ("baseline.jpg", 1),
        ] {
            #expect(try self.decoder.frameCount(of: Images.fixture(name)) == count, "\(name)")
        }
        let gif = try Images.fixture("animated.gif")
        // Without its trailer, a GIF still has its whole frames; cut inside a frame, it is truncated.
        #expect(try self.decoder.frameCount(of: gif.dropLast()) == 4)
        #expect { try self.decoder.frameCount(of: gif.prefix(gif.count - 6)) } throws: {
            ($0 as? ImageError)?.code == .truncated
        }
        #expect { try self.decoder.frameCount(of: Data("RIFF\u{10}\0\0\0WEBPVP8X".utf8)) } throws: {
            ($0 as? ImageError) != nil
        }
        #expect { try self.decoder.frameCount(of: Data("not an image".utf8)) } throws: {
            ($0 as? ImageError)?.code == .unknownFormat
        }
    }

    @Test("a GIF's NETSCAPE2.0 count is of repeats: N plays N + 1 times, 0 for ever, none once, as gif2webp reads it")
    func gifLoopCounts() throws {
        let gif = try Images.fixture("animated.gif")
        let name = try #require(gif.firstRange(of: Data("NETSCAPE2.0".utf8)))
        // 21 FF 0B "NETSCAPE2.0" 03 01 <repeats, 2 bytes> 00: 19 bytes from 3 before the name.
        let start = name.lowerBound - 3
        var twice = gif
        twice[name.upperBound + 2] = 2
        var none = gif
        none.removeSubrange(start..<start + 19)
        #expect(try self.decoder.decodeAnimation(gif).loopCount == 0)
        #expect(try self.decoder.decodeAnimation(twice).loopCount == 3)
        #expect(try self.decoder.decodeAnimation(none).loopCount == 1)
        #expect(try self.decoder.decodeAnimation(none).frames.count == 4)
    }

    @Test("an animation encodes as an animated WebP: every frame, its duration and the loop count kept")
    func animatedWebPEncoding() throws {
        for name in ["animated.gif", "animated.webp"] {
            let animation = try self.decoder.decodeAnimation(Images.fixture(name))
            let encoded = try ImageEncoder.webp(animation, quality: 100)
            #expect(ImageFormat(sniffing: encoded) == .webp)
            #expect(try self.decoder.frameCount(of: encoded) == animation.frames.count, "\(name)")
            let decoded = try self.decoder.decodeAnimation(encoded)
            #expect(decoded.frames.map(\.duration) == animation.frames.map(\.duration), "\(name)")
            #expect(decoded.loopCount == animation.loopCount)
            for (index, (out, original)) in zip(decoded.frames, animation.frames).enumerated() {
                for y in 0..<original.bitmap.height {
                    for x in 0..<original.bitmap.width {
                        let (got, wanted) = (out.bitmap.pixel(x: x, y: y), original.bitmap.pixel(x: x, y: y))
                        // Alpha is kept exactly; colors, lossily, where they show: the WebP's
                        // gradients closely, the GIF's 2 × 2 blocks of primaries not (4:2:0 chroma).
                        #expect(got[3] == wanted[3], "\(name) frame \(index) at (\(x), \(y))")
                        #expect(
                            wanted[3] == 0 || name.hasSuffix(".gif") || Images.close(got, wanted, 24),
                            "\(name) frame \(index) at (\(x), \(y)): \(got) for \(wanted)"
                        )
                    }
                }
            }
        }
        // Encoded as WebP that does not animate, or as another format, an animation is its first frame.
        let animation = try self.decoder.decodeAnimation(Images.fixture("animated.webp"))
        for encoding in [ImageEncoding.webp(), .png] {
            let still = try ImageEncoder.encode(animation, as: encoding)
            #expect(try self.decoder.frameCount(of: still) == 1)
        }
        #expect(try self.decoder.frameCount(of: ImageEncoder.encode(animation, as: .webp(animates: true))) == 3)
        // Frames of different sizes are refused, not drawn out of bounds.
        let mixed = Animation(
            frames: [
                animation.frames[0], .init(bitmap: Images.photo(width: 4, height: 4), duration: .milliseconds(10)),
            ],
            loopCount: 0
        )
        #expect { try ImageEncoder.webp(mixed) } throws: { ($0 as? ImageError)?.code == .unsupported }
    }

    @Test("an animated WebP's frames and durations, and its first frame as a still")
    func animatedWebP() throws {
        let data = try Images.fixture("animated.webp")
        let animation = try self.decoder.decodeAnimation(data)
        #expect(animation.frames.map(\.duration) == [.milliseconds(50), .milliseconds(100), .milliseconds(200)])
        #expect(animation.loopCount == 2)
        for (index, frame) in animation.frames.enumerated() {
            for y in 0..<6 {
                for x in 0..<8 {
                    let color = (0..<3).map { UInt8((Int(Images.value(x, y, $0)) + 40 * index) % 256) } + [255]
                    #expect(frame.bitmap.pixel(x: x, y: y) == color, "frame \(index) at (\(x), \(y))")
                }
            }
        }
        #expect(try self.decoder.decode(data) == animation.frames[0].bitmap)
        #expect(try self.decoder.size(of: data) == (8, 6))
        // A still image is an animation of one frame.
        let still = try self.decoder.decodeAnimation(Images.fixture("blocks.avif"))
        #expect(still.frames.count == 1 && still.frames[0].duration == .zero)
    }

    @Test(
        "an animated WebP's first frame is scaled as it is decoded when it covers the canvas, composited whole when not"
    )
    func scaledFirstFrame() throws {
        let covering = try Images.fixture("animated.webp")
        let half = try self.decoder.decode(covering, scale: 0.5)
        #expect(half.width == 4 && half.height == 3)
        #expect(try self.decoder.decode(covering, scale: 0.1).width == 1)
        for y in 0..<3 {
            for x in 0..<4 {
                // libwebp's rescaler averages each 2 × 2 block of the lossless frame.
                let block = [(0, 0), (1, 0), (0, 1), (1, 1)].map { dx, dy in
                    (0..<3).map { Int(Images.value(2 * x + dx, 2 * y + dy, $0)) }
                }
                let mean = (0..<3).map { c in UInt8(block.map { $0[c] }.reduce(0, +) / 4) } + [255]
                #expect(Images.close(half.pixel(x: x, y: y), mean, 2), "(\(x), \(y)): \(half.pixel(x: x, y: y))")
            }
        }
        // A first frame at (4, 2) on a 36 × 26 canvas: the canvas is composited whole, its border
        // transparent.
        let offset = try Images.fixture("offset-frame.webp")
        let first = try self.decoder.decodeAnimation(offset).frames[0].bitmap
        #expect(try self.decoder.decode(offset, scale: 0.5) == first)
        #expect(first.width == 36 && first.height == 26)
        #expect(first.pixel(x: 3, y: 25) == Self.clear && first.pixel(x: 35, y: 1) == Self.clear)
        #expect(Images.close(first.pixel(x: 8, y: 6), Images.block(0, 0) + [255], 10))
    }

    @Test("canvases, frames and frame counts past the pixel limit are refused before they are allocated")
    func bombs() throws {
        // A GIF whose canvas says 65535 × 65535.
        var gif = try Images.fixture("still-interlaced.gif")
        gif.replaceSubrange(6..<10, with: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(try self.decoder.size(of: gif) == (65535, 65535))
        #expect { _ = try self.decoder.decode(gif) } throws: { ($0 as? ImageError)?.code == .tooLarge }
        // An animated WebP whose canvas says 16384 × 16384 (VP8X: width and height less one, 24 bits each).
        var webp = try Images.fixture("animated.webp")
        let vp8x = try #require(webp.firstRange(of: Data("VP8X".utf8))).lowerBound
        webp.replaceSubrange(vp8x + 12..<vp8x + 18, with: [0xFF, 0x3F, 0, 0xFF, 0x3F, 0])
        #expect { _ = try self.decoder.decodeAnimation(webp) } throws: { ($0 as? ImageError)?.code == .tooLarge }
        #expect { _ = try self.decoder.decode(webp) } throws: { ($0 as? ImageError)?.code == .tooLarge }
        // Frames count against the limit together, each at least 256 pixels: the first frame
        // fits in 700, three frames do not.
        let small = ImageDecoder(maximumPixelCount: 700)
        for name in ["animated.gif", "animated.webp"] {
            let data = try Images.fixture(name)
            #expect(try small.decode(data).width > 0)
            #expect { _ = try small.decodeAnimation(data) } throws: { error in
                (error as? ImageError)?.code == .tooLarge && (error as? ImageError)?.message.contains("700") == true
            }
        }
        let tiny = ImageDecoder(maximumPixelCount: 32 * 24 - 1)
        #expect { _ = try tiny.decode(Images.fixture("blocks.avif")) } throws: {
            ($0 as? ImageError)?.code == .tooLarge
        }
        #expect { _ = try tiny.decode(Images.fixture("blocks.webp")) } throws: {
            ($0 as? ImageError)?.code == .tooLarge
        }
    }

    @Test("a file cut anywhere is a clear error, never a crash; cut in half, a truncation")
    func truncated() throws {
        for name in [
            "blocks.webp", "pattern-alpha.webp", "animated.webp", "blocks.avif", "still-interlaced.gif", "animated.gif",
        ] {
            let data = try Images.fixture(name)
            let whole = try self.decoder.decodeAnimation(data).frames
            for length in 0..<data.count {
                let cut = data.prefix(length)
                do {
                    let frames = try self.decoder.decodeAnimation(cut).frames
                    // Only a GIF may end early, after a whole frame: it has the frames before.
                    #expect(
                        name.hasSuffix(".gif") && frames == Array(whole.prefix(frames.count)),
                        "\(name) at \(length)"
                    )
                } catch {
                    #expect(!error.message.isEmpty)
                }
                _ = try? self.decoder.decode(cut)
            }
            #expect(throws: ImageError.self) { _ = try self.decoder.decode(data.prefix(data.count / 2)) }
            if !name.hasSuffix(".avif") {
                #expect { _ = try self.decoder.decode(data.prefix(data.count / 2)) } throws: {
                    ($0 as? ImageError)?.code == .truncated
                }
            }
        }
    }

    @Test("a file with any one byte damaged decodes or is a clear error, never a crash")
    func damaged() throws {
        for name in [
            "blocks.webp", "pattern-alpha.webp", "animated.webp", "blocks.avif", "still-interlaced.gif", "animated.gif",
        ] {
            let data = try Images.fixture(name)
            for offset in 0..<data.count {
                var damaged = data
                damaged[offset] ^= 0xA5
                _ = try? self.decoder.decode(damaged)
                _ = try? self.decoder.decodeAnimation(damaged)
            }
        }
        // LZW codes past the table are damage, said as such.
        var gif = try Images.fixture("still-interlaced.gif")
        let image = try #require(gif.lastIndex(of: 0x2C))
        gif.replaceSubrange(image + 11..<image + 13, with: [0x02, 0xFF])
        #expect { _ = try self.decoder.decode(gif) } throws: { ($0 as? ImageError)?.code == .corrupt }
    }

    @Test("WebP and AVIF encodings decode back: lossless WebP exactly, lossy within their error, alpha kept")
    func roundTrips() throws {
        let photo = Images.photo(width: 64, height: 48)
        // No pixel fully transparent: lossless WebP may change the colors of those.
        let translucent = Images.bitmap(width: 16, height: 8) { x, y in
            [UInt8(x * 16), UInt8(y * 30), 90, UInt8(x * 8 + y + 1)]
        }
        #expect(try self.decoder.decode(ImageEncoder.webp(translucent, lossless: true)) == translucent)
        let gray = Images.bitmap(width: 20, height: 10, format: .gray8) { x, y in [UInt8(x * 12 + y)] }
        let grayRGBA = Images.bitmap(width: 20, height: 10) { x, y in
            [UInt8(x * 12 + y), UInt8(x * 12 + y), UInt8(x * 12 + y), 255]
        }
        #expect(try self.decoder.decode(ImageEncoder.webp(gray, lossless: true)) == grayRGBA)
        let flat = Images.bitmap(width: 16, height: 16) { _, _ in [200, 100, 50, 255] }
        for encoding in [ImageEncoding.webp(quality: 90), .avif(quality: 90), .jpeg(quality: 95), .png] {
            let data = try ImageEncoder.encode(flat, as: encoding)
            #expect(ImageFormat(sniffing: data) == encoding.format)
            #expect(
                Images.close(try self.decoder.decode(data).pixel(x: 7, y: 7), [200, 100, 50, 255], 4),
                "\(encoding)"
            )
            let decoded = try self.decoder.decode(ImageEncoder.encode(photo, as: encoding))
            #expect(decoded.width == 64 && decoded.height == 48)
        }
        // Alpha survives lossy WebP and AVIF (AVIF's alpha plane is lossless).
        let avif = try self.decoder.decode(ImageEncoder.avif(translucent, quality: 80))
        #expect(avif.hasTransparency && avif.pixel(x: 5, y: 3)[3] == translucent.pixel(x: 5, y: 3)[3])
        #expect(try self.decoder.decode(ImageEncoder.webp(translucent)).hasTransparency)
        #expect(ImageEncoding(.gif) == nil)
        #expect(ImageEncoding.webp().description == "webp:80" && ImageEncoding.png.description == "png")
    }
}

extension Error {
    fileprivate var message: String { (self as? ImageError)?.message ?? "" }
}
