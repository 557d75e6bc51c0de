import CachalotImages
import Foundation

// What a variant costs in each encoding: a thumbnail of one image file, encoded as JPEG, WebP
// and AVIF by ImageEncoder; for each, the bytes, the PSNR of what decodes back against the
// thumbnail itself (RGB, in dB: higher is closer), and the median time of one encoding.
// Prints a Markdown table.
// Usage: VariantSizes FILE SIZE RUNS

let arguments = CommandLine.arguments
guard arguments.count == 4, let size = Int(arguments[2]), let runs = Int(arguments[3]), runs > 0 else {
    FileHandle.standardError.write(Data("usage: VariantSizes FILE SIZE RUNS\n".utf8))
    exit(64)
}
let decoder = ImageDecoder()
let original = try Data(contentsOf: URL(filePath: arguments[1]))
let thumbnail = try Thumbnail(maximumPixelSize: size).process(decoder.decode(original))

/// The PSNR of `decoded` against `reference`, over red, green and blue.
func psnr(_ decoded: Bitmap, _ reference: Bitmap) -> Double {
    var squares = 0.0
    for y in 0..<reference.height {
        for x in 0..<reference.width {
            let (a, b) = (decoded.pixel(x: x, y: y), reference.pixel(x: x, y: y))
            for channel in 0..<3 {
                let difference = Double(a[channel]) - Double(b[channel])
                squares += difference * difference
            }
        }
    }
    let mean = squares / Double(reference.width * reference.height * 3)
    return mean == 0 ? .infinity : 10 * log10(255 * 255 / mean)
}

let encodings: [(String, (Bitmap) throws -> Data)] = [
    ("JPEG, quality 90", { try ImageEncoder.jpeg($0, quality: 90) }),
    ("JPEG, quality 80", { try ImageEncoder.jpeg($0, quality: 80) }),
    ("WebP, quality 80", { try ImageEncoder.webp($0, quality: 80) }),
    ("WebP, quality 90", { try ImageEncoder.webp($0, quality: 90) }),
    ("AVIF, quality 60, speed 8", { try ImageEncoder.avif($0, quality: 60, speed: 8) }),
    ("AVIF, quality 75, speed 8", { try ImageEncoder.avif($0, quality: 75, speed: 8) }),
    ("AVIF, quality 60, speed 6", { try ImageEncoder.avif($0, quality: 60, speed: 6) }),
]
let clock = ContinuousClock()
print("| \(thumbnail.width) x \(thumbnail.height) thumbnail | bytes | PSNR | encoding (median of \(runs)) |")
print("| --- | ---: | ---: | ---: |")
for (name, encode) in encodings {
    var times: [Duration] = []
    var data = Data()
    for _ in 0..<runs { times.append(try clock.measure { data = try encode(thumbnail) }) }
    let median = times.sorted()[runs / 2]
    let milliseconds = Double(median.components.seconds) * 1_000 + Double(median.components.attoseconds) / 1e15
    let quality = psnr(try decoder.decode(data), thumbnail)
    print(
        "| \(name) | \(data.count) | \(String(format: "%.2f dB", quality)) | \(String(format: "%.2f ms", milliseconds)) |"
    )
}
