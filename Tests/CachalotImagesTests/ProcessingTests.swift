import Foundation
import Testing

@testable import CachalotImages

@Suite("Resizing and processors")
struct ProcessingTests {
    let photo = Images.photo(width: 400, height: 300)

    @Test("resize fits, fills or crops to a box, keeping the aspect ratio; thumbnails never enlarge")
    func modes() throws {
        let sizes: [(any ImageProcessing, Int, Int)] = [
            (Resize(width: 100, height: 100, mode: .aspectFit), 100, 75),
            (Resize(width: 100, height: 100, mode: .aspectFill), 133, 100),
            (Resize(width: 100, height: 100, mode: .crop), 100, 100),
            (Resize(width: 800, height: 800, mode: .aspectFit), 400, 300),
            (Resize(width: 800, height: 800, mode: .aspectFit, upscales: true), 800, 600),
            (Thumbnail(maximumPixelSize: 64), 64, 48),
            (Thumbnail(maximumPixelSize: 1_000), 400, 300),
        ]
        for (processor, width, height) in sizes {
            let result = try processor.process(self.photo)
            #expect(result.width == width && result.height == height, "\(processor.identifier)")
            #expect(result.cost == width * 4 * height)
        }
    }

    @Test("a solid color stays exactly that color; a gradient stays ordered; fine detail averages out")
    func resamplingQuality() throws {
        let solid = Images.bitmap(width: 97, height: 53) { _, _ in [12, 200, 77, 255] }
        let small = try Resize(width: 31, height: 31).process(solid)
        #expect(small.pixels.count == small.cost)
        #expect(
            (0..<small.height).allSatisfy { y in
                (0..<small.width).allSatisfy { small.pixel(x: $0, y: y) == [12, 200, 77, 255] }
            }
        )

        let gradient = Images.bitmap(width: 256, height: 4, format: .gray8) { x, _ in [UInt8(x)] }
        let shrunk = try Resize(width: 64, height: 1, mode: .aspectFill).process(gradient)
        let row = (0..<shrunk.width).map { shrunk.pixel(x: $0, y: 0)[0] }
        #expect(zip(row, row.dropFirst()).allSatisfy { $0 < $1 })

        let checkerboard = Images.bitmap(width: 64, height: 64, format: .gray8) { x, y in [(x + y) % 2 == 0 ? 0 : 255] }
        let averaged = try Resize(width: 8, height: 8).process(checkerboard)
        #expect((0..<8).allSatisfy { abs(Int(averaged.pixel(x: $0, y: 4)[0]) - 128) <= 2 })
    }

    @Test("a box reduction averages whole blocks, and partial blocks at the edges")
    func boxReduction() throws {
        let gray = Images.bitmap(width: 5, height: 3, format: .gray8) { x, y in [UInt8(x * 10 + y * 100)] }
        let reduced = try #require(Resampler.reduced(gray, by: 2))
        #expect(reduced.width == 3 && reduced.height == 2)
        // (0+10+100+110)/4 = 55, (20+30+120+130)/4 = 75, (40+140)/2 = 90; then the last row alone.
        #expect(
            [reduced.pixel(x: 0, y: 0), reduced.pixel(x: 1, y: 0), reduced.pixel(x: 2, y: 0)] == [[55], [75], [90]]
        )
        #expect([reduced.pixel(x: 0, y: 1), reduced.pixel(x: 2, y: 1)] == [[205], [240]])
    }

    @Test("a large reduction through a box reduction first gives the picture the bicubic filter alone gives")
    func reducingGap() throws {
        let photo = Images.photo(width: 800, height: 600)
        let reduced = Resampler.resize(photo, width: 64, height: 48)
        let direct = Resampler.resize(photo, width: 64, height: 48, reducing: false)
        var squares = 0.0
        for y in 0..<48 {
            for x in 0..<64 {
                for (a, b) in zip(reduced.pixel(x: x, y: y), direct.pixel(x: x, y: y)) {
                    squares += (Double(a) - Double(b)) * (Double(a) - Double(b))
                }
            }
        }
        let psnr = 10 * log10(255 * 255 / max(squares / Double(64 * 48 * 4), 1e-9))
        #expect(psnr > 35, "PSNR \(psnr) dB")
        #expect(reduced != direct)
    }

    @Test("transparent pixels lend no color to their neighbours")
    func premultipliedAlpha() throws {
        // Opaque blue beside fully transparent red.
        let image = Images.bitmap(width: 64, height: 8) { x, _ in x < 32 ? [0, 0, 255, 255] : [255, 0, 0, 0] }
        let small = try Resize(width: 16, height: 2, mode: .aspectFill).process(image)
        for x in 0..<16 {
            let pixel = small.pixel(x: x, y: 1)
            if pixel[3] > 0 { #expect(pixel[0] <= 1 && pixel[2] >= 250, "pixel \(x): \(pixel)") }
        }
    }

    @Test("identifiers name every parameter, and make distinct variant keys")
    func identifiersAndKeys() {
        let url = URL(string: "HTTPS://Example.com:443/a.jpg?v=2")!
        #expect(Thumbnail(maximumPixelSize: 256).identifier == "thumbnail(256)")
        #expect(Resize(width: 10, height: 20, mode: .crop).identifier == "resize(10x20,crop)")
        #expect(ImagePipeline.key(for: url, processors: []) == "https://example.com/a.jpg?v=2")
        #expect(
            ImagePipeline.key(for: url, processors: [Thumbnail(maximumPixelSize: 256), Resize(width: 8, height: 8)])
                == "https://example.com/a.jpg?v=2#thumbnail(256)|resize(8x8,fit)"
        )
        let identifiers = [
            Resize(width: 8, height: 8).identifier, Resize(width: 8, height: 8, mode: .aspectFill).identifier,
            Resize(width: 8, height: 8, upscales: true).identifier, Resize(width: 8, height: 9).identifier,
            Thumbnail(maximumPixelSize: 8).identifier,
        ]
        #expect(Set(identifiers).count == identifiers.count)
    }

    @Test("a thumbnail asks the decoder for no more than it needs")
    func requiredScale() {
        let thumbnail = Thumbnail(maximumPixelSize: 256)
        #expect(thumbnail.requiredScale(sourceWidth: 4_000, sourceHeight: 3_000) == 0.064)
        #expect(thumbnail.requiredScale(sourceWidth: 100, sourceHeight: 100) == 1)
    }
}
