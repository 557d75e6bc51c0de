import CCachalotImageCodecs
import Foundation

/// Encodes ``Bitmap``s as JPEG (libjpeg-turbo) or PNG (libpng), to store processed variants.
public enum ImageEncoder {
    /// The bitmap as a JPEG at `quality` (1 to 100); alpha is dropped. A progressive JPEG comes
    /// in scans of increasing detail (libjpeg's default script): about as large, and its
    /// thumbnails skip most of its scans (see ``ImageDecoder/decode(_:scale:)``).
    public static func jpeg(_ bitmap: Bitmap, quality: Int = 90, progressive: Bool = false) throws(ImageError) -> Data {
        let quality = Int32(min(100, max(1, quality)))
        return try Self.encoded(bitmap, "JPEG") { pixels, out, size, message in
            cachalot_jpeg_encode(pixels, quality, progressive ? 1 : 0, out, size, message, ImageDecoder.messageSize)
        }
    }

    /// The bitmap as a PNG, losslessly: gray, or RGBA with its alpha.
    public static func png(_ bitmap: Bitmap) throws(ImageError) -> Data {
        try Self.encoded(bitmap, "PNG") { pixels, out, size, message in
            cachalot_png_encode(pixels, out, size, message, ImageDecoder.messageSize)
        }
    }

    private static func encoded(
        _ bitmap: Bitmap,
        _ format: String,
        _ encode: (
            UnsafePointer<cachalot_pixels>, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>,
            UnsafeMutablePointer<Int>, UnsafeMutablePointer<CChar>
        ) -> cachalot_image_status
    ) throws(ImageError) -> Data {
        var output: UnsafeMutablePointer<UInt8>?
        var size = 0
        var message = [CChar](repeating: 0, count: ImageDecoder.messageSize)
        let status = bitmap.pixels.withUnsafeBytes { bytes in
            var pixels = cachalot_pixels(
                pixels: UnsafeMutablePointer(mutating: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)),
                width: UInt32(bitmap.width),
                height: UInt32(bitmap.height),
                bytes_per_row: UInt32(bitmap.bytesPerRow),
                channels: UInt32(bitmap.format.bytesPerPixel)
            )
            return encode(&pixels, &output, &size, &message)
        }
        try ImageDecoder.check(status, message, format)
        guard let output else { return Data() }
        return Data(bytesNoCopy: output, count: size, deallocator: .free)
    }
}
