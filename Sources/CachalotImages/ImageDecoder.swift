import CCachalotImageCodecs
import Foundation

/// Decodes PNG (through libpng) and JPEG (through libjpeg-turbo) into ``Bitmap``s.
///
/// - PNG of every kind (gray, gray with alpha, palette, RGB, RGBA; 1 to 16 bits a channel;
///   interlaced) becomes `.gray8` if it is gray without transparency, else `.rgba8`.
/// - JPEG (baseline, progressive) becomes `.gray8` if gray, else `.rgba8`. Its EXIF orientation
///   is applied: the bitmap is upright, as it is meant to be seen. CMYK JPEGs are refused.
/// - A header declaring more than ``maximumPixelCount`` pixels is refused before the pixels are
///   allocated (a decompression bomb costs nothing). Damaged and truncated data are errors, never
///   a crash; a JPEG missing its end is an error, not a gray-filled picture.
public struct ImageDecoder: Sendable {
    /// The most pixels (width × height, as declared) an image may have. Default: 100 million,
    /// 400 MB as RGBA.
    public var maximumPixelCount: Int

    public init(maximumPixelCount: Int = 100_000_000) {
        self.maximumPixelCount = maximumPixelCount
    }

    /// Decodes the whole image.
    public func decode(_ data: Data) throws(ImageError) -> Bitmap {
        try self.decode(data, scale: 1)
    }

    /// Decodes the image at a smaller size where the format makes that cheap, but at least
    /// `scale` of its full size in each dimension (1 is full size).
    ///
    /// JPEG decodes at 1/2, 1/4 or 1/8 inside the decoder, skipping most of the work: a 256-pixel
    /// thumbnail of a 4000-pixel photo needs only 1/8. At 1/8, a progressive JPEG skips more:
    /// the AC scans that a decode at 1/8 ignores are not decoded at all, for the same pixels.
    /// PNG always decodes whole.
    public func decode(_ data: Data, scale: Double) throws(ImageError) -> Bitmap {
        let limit = UInt64(self.maximumPixelCount)
        switch ImageFormat(sniffing: data) {
        case .png:
            return try Self.decoded(data, "PNG") { bytes, count, pixels, message in
                cachalot_png_decode(bytes, count, limit, pixels, message, Self.messageSize)
            }
        case .jpeg:
            let denominator = UInt32(Self.denominator(for: scale))
            // At 1/8, a progressive JPEG is decoded without the AC scans it ignores (JPEGScans).
            let scans = denominator == 8 ? JPEGScans.withoutACScans(data) ?? data : data
            let bitmap = try Self.decoded(scans, "JPEG") { bytes, count, pixels, message in
                cachalot_jpeg_decode(bytes, count, limit, denominator, pixels, message, Self.messageSize)
            }
            return Orientation(exifIn: data).apply(to: bitmap)
        case nil:
            throw ImageError(.unknownFormat, "the data is neither PNG nor JPEG (by its first bytes)")
        }
    }

    /// The width and height the image will have once decoded whole (for JPEG, once oriented),
    /// read from its header.
    public func size(of data: Data) throws(ImageError) -> (width: Int, height: Int) {
        switch ImageFormat(sniffing: data) {
        case .png:
            // IHDR is the first chunk: width and height at bytes 16 and 20, big-endian.
            guard data.count >= 24 else { throw ImageError(.truncated, "the data ends inside the PNG header") }
            let number = { (offset: Int) in
                data[data.startIndex + offset..<data.startIndex + offset + 4].reduce(0) { $0 << 8 | Int($1) }
            }
            return (number(16), number(20))
        case .jpeg:
            var width: UInt32 = 0
            var height: UInt32 = 0
            var message = [CChar](repeating: 0, count: Self.messageSize)
            let status = data.withUnsafeBytes { bytes in
                cachalot_jpeg_size(
                    bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    bytes.count,
                    &width,
                    &height,
                    &message,
                    Self.messageSize
                )
            }
            try Self.check(status, message, "JPEG")
            return Orientation(exifIn: data).swapsAxes ? (Int(height), Int(width)) : (Int(width), Int(height))
        case nil:
            throw ImageError(.unknownFormat, "the data is neither PNG nor JPEG (by its first bytes)")
        }
    }

    /// The largest of 1, 2, 4 and 8 that keeps at least `scale` of the size.
    static func denominator(for scale: Double) -> Int {
        [8, 4, 2].first { 1 / Double($0) >= scale } ?? 1
    }

    static let messageSize = 256

    /// Runs a C decoder on the data's bytes, and makes what it decoded into a bitmap that owns
    /// the pixels (freed with `free`).
    private static func decoded(
        _ data: Data,
        _ format: String,
        _ decode: (
            UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<cachalot_pixels>, UnsafeMutablePointer<CChar>
        ) -> cachalot_image_status
    ) throws(ImageError) -> Bitmap {
        var pixels = cachalot_pixels()
        var message = [CChar](repeating: 0, count: Self.messageSize)
        let status = data.withUnsafeBytes { bytes in
            decode(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, &pixels, &message)
        }
        try Self.check(status, message, format)
        let bytesPerRow = Int(pixels.bytes_per_row)
        return Bitmap(
            width: Int(pixels.width),
            height: Int(pixels.height),
            format: pixels.channels == 1 ? .gray8 : .rgba8,
            bytesPerRow: bytesPerRow,
            pixels: Data(bytesNoCopy: pixels.pixels, count: bytesPerRow * Int(pixels.height), deallocator: .free)
        )
    }

    /// Throws the error a C codec's status and message describe, if it failed.
    static func check(_ status: cachalot_image_status, _ message: [CChar], _ format: String) throws(ImageError) {
        let text =
            "\(format): " + String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        switch status {
        case CACHALOT_IMAGE_OK: return
        case CACHALOT_IMAGE_TRUNCATED: throw ImageError(.truncated, text)
        case CACHALOT_IMAGE_TOO_LARGE: throw ImageError(.tooLarge, text)
        case CACHALOT_IMAGE_UNSUPPORTED: throw ImageError(.unsupported, text)
        case CACHALOT_IMAGE_OUT_OF_MEMORY: throw ImageError(.outOfMemory, text)
        default: throw ImageError(.corrupt, text)
        }
    }
}
