import CachalotImages
import Foundation

// Times 256-pixel thumbnails of one image file, as Benchmarks/images-vs-libvips-pillow asks: reads
// the file once, then makes the thumbnail `runs` times and prints the median time in seconds, then
// on a second line the most memory the process held (its peak resident set since exec, the file
// included, in bytes: Linux's VmHWM; 0 if unknown).
// Usage: ThumbnailTimer FILE RUNS SIZE

let arguments = CommandLine.arguments
guard arguments.count == 4, let runs = Int(arguments[2]), let size = Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: ThumbnailTimer FILE RUNS SIZE\n".utf8))
    exit(64)
}
let data = try Data(contentsOf: URL(filePath: arguments[1]))
let thumbnail = Thumbnail(maximumPixelSize: size)
let decoder = ImageDecoder()
let clock = ContinuousClock()
var times: [Double] = []
for _ in 0..<runs {
    let elapsed = try clock.measure {
        let source = try decoder.size(of: data)
        let scale = thumbnail.requiredScale(sourceWidth: source.width, sourceHeight: source.height)
        let bitmap = try thumbnail.process(decoder.decode(data, scale: scale))
        precondition(max(bitmap.width, bitmap.height) == size)
    }
    times.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}
let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }?.split(separator: " ").dropFirst().first
print(times.sorted()[times.count / 2])
print((peak.flatMap { Int($0) } ?? 0) * 1024)
