import Foundation

/// How an image's stored pixels are turned to be seen upright, as EXIF numbers it: a JPEG's
/// EXIF orientation, or an AVIF's rotation and mirror properties in the same terms.
struct Orientation: Equatable {
    /// 1 (as stored) to 8, as EXIF numbers them.
    let value: Int

    init(_ value: Int) {
        self.value = (1...8).contains(value) ? value : 1
    }

    /// The orientation tag (0x0112) of the first APP1 Exif segment of the JPEG `data`, or 1.
    init(exifIn data: Data) {
        self.init(Self.exifValue(in: [UInt8](data.prefix(256 << 10))) ?? 1)
    }

    /// Whether seeing it upright swaps width and height (orientations 5 to 8).
    var swapsAxes: Bool { self.value >= 5 }

    /// `bitmap` turned upright.
    func apply(to bitmap: Bitmap) -> Bitmap {
        guard self.value != 1 else { return bitmap }
        let (width, height) = self.swapsAxes ? (bitmap.height, bitmap.width) : (bitmap.width, bitmap.height)
        let size = bitmap.format.bytesPerPixel
        return Bitmap(width: width, height: height, format: bitmap.format) { destination, bytesPerRow in
            bitmap.pixels.withUnsafeBytes { (source: UnsafeRawBufferPointer) in
                for y in 0..<height {
                    for x in 0..<width {
                        let (sourceX, sourceY) = self.storedPixel(shownAt: x, y, in: bitmap)
                        let from = sourceY * bitmap.bytesPerRow + sourceX * size
                        let to = y * bytesPerRow + x * size
                        for channel in 0..<size { destination[to + channel] = source[from + channel] }
                    }
                }
            }
        }
    }

    /// The stored pixel of `bitmap` that is shown at (`x`, `y`) once turned upright.
    private func storedPixel(shownAt x: Int, _ y: Int, in bitmap: Bitmap) -> (x: Int, y: Int) {
        let (right, bottom) = (bitmap.width - 1, bitmap.height - 1)
        switch self.value {
        case 2: return (right - x, y)
        case 3: return (right - x, bottom - y)
        case 4: return (x, bottom - y)
        case 5: return (y, x)
        case 6: return (y, bottom - x)
        case 7: return (right - y, bottom - x)
        case 8: return (right - y, x)
        default: return (x, y)
        }
    }

    /// Walks the JPEG's segments up to the first scan, looking for Exif's orientation.
    private static func exifValue(in bytes: [UInt8]) -> Int? {
        var offset = 2
        while offset + 4 <= bytes.count, bytes[offset] == 0xFF {
            let marker = bytes[offset + 1]
            let length = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            if marker == 0xDA || length < 2 { return nil }  // start of scan: no more headers
            let body = offset + 4
            let end = min(bytes.count, offset + 2 + length)
            if marker == 0xE1, end - body > 14, Array(bytes[body..<body + 6]) == Array("Exif\0\0".utf8) {
                return Self.tiffOrientation(Array(bytes[body + 6..<end]))
            }
            offset += 2 + length
        }
        return nil
    }

    /// The orientation entry of a TIFF header's first directory.
    private static func tiffOrientation(_ tiff: [UInt8]) -> Int? {
        guard tiff.count >= 8 else { return nil }
        let littleEndian = tiff[0] == 0x49
        func number(_ offset: Int, _ count: Int) -> Int? {
            guard offset >= 0, offset + count <= tiff.count else { return nil }
            let bytes = tiff[offset..<offset + count]
            return (littleEndian ? Array(bytes.reversed()) : Array(bytes)).reduce(0) { $0 << 8 | Int($1) }
        }
        guard let directory = number(4, 4), let entries = number(directory, 2) else { return nil }
        for index in 0..<min(entries, 512) {
            let entry = directory + 2 + index * 12
            if number(entry, 2) == 0x0112 { return number(entry + 8, 2) }
        }
        return nil
    }
}
