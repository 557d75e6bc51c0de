import CCachalotImageCodecs
import Foundation

/// Bitmaps as the C half of CachalotImages reads and writes them.
extension Bitmap {
    /// A bitmap that owns pixels a C function allocated (freed with `free`): 1 channel is gray,
    /// 4 are RGBA.
    init(owning pixels: cachalot_pixels) {
        let bytesPerRow = Int(pixels.bytes_per_row)
        self.init(
            width: Int(pixels.width),
            height: Int(pixels.height),
            format: pixels.channels == 1 ? .gray8 : .rgba8,
            bytesPerRow: bytesPerRow,
            pixels: Data(bytesNoCopy: pixels.pixels, count: bytesPerRow * Int(pixels.height), deallocator: .free)
        )
    }

    /// Calls `body` with the bitmap described for a C function that reads its pixels.
    func withPixels<Result>(_ body: (UnsafePointer<cachalot_pixels>) -> Result) -> Result {
        self.pixels.withUnsafeBytes { bytes in
            var pixels = cachalot_pixels(
                pixels: UnsafeMutablePointer(mutating: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)),
                width: UInt32(self.width),
                height: UInt32(self.height),
                bytes_per_row: UInt32(self.bytesPerRow),
                channels: UInt32(self.format.bytesPerPixel)
            )
            return body(&pixels)
        }
    }
}
