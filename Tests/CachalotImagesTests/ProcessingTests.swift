import CachalotImages
import Foundation
import Testing

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
