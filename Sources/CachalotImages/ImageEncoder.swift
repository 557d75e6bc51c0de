import CCachalotImageCodecs
import Foundation

/// Encodes ``Bitmap``s as JPEG (libjpeg-turbo), PNG (libpng), WebP (libwebp) or AVIF (libavif,
/// with the AV1 encoder it was built with), to store processed variants. GIF is not encoded.
public enum ImageEncoder {
    /// The bitmap in `encoding`'s format, at its quality: JPEG and WebP lossy, PNG lossless, AVIF
    /// at speed 8; the same as calling ``jpeg(_:quality:progressive:)``, ``png(_:)``,
    /// ``webp(_:quality:lossless:)`` or ``avif(_:quality:speed:)``.
    ///
    /// - Throws: ``ImageError`` with code `unsupported` for GIF, and what the format's own
    ///   function throws.
    public static func encode(_ bitmap: Bitmap, as encoding: ImageEncoding) throws(ImageError) -> Data {
        switch encoding.format {
        case .jpeg: try Self.jpeg(bitmap, quality: encoding.quality)
        case .png: try Self.png(bitmap)
        case .webp: try Self.webp(bitmap, quality: encoding.quality)
        case .avif: try Self.avif(bitmap, quality: encoding.quality)
        case .gif: throw ImageError(.unsupported, "GIF is decoded, not encoded")
        }
    }

    /// The animation in `encoding`'s format: every frame as an animated WebP if the encoding
    /// ``ImageEncoding/animates`` and there is more than one, else the first frame, as
    /// ``encode(_:as:)-(Bitmap,_)`` encodes it.
    ///
    /// - Throws: what ``webp(_:quality:)`` or ``encode(_:as:)-(Bitmap,_)`` throws.
    public static func encode(_ animation: Animation, as encoding: ImageEncoding) throws(ImageError) -> Data {
        guard encoding.animates, encoding.format == .webp, animation.frames.count > 1 else {
            return try Self.encode(animation.frames[0].bitmap, as: encoding)
        }
        return try Self.webp(animation, quality: encoding.quality)
    }

    /// The animation as an animated WebP, lossy at `quality` (0 to 100), each frame shown for its
    /// duration (to the millisecond), played ``Animation/loopCount`` times. libwebp keeps of
    /// each frame the rectangle that changed, and merges a frame identical to the one before
    /// into it, its duration added.
    ///
    /// - Parameters:
    ///   - animation: The frames, all of the first's size.
    ///   - quality: From 0 to 100, clamped to that range. Default: 80.
    /// - Throws: ``ImageError`` with code `unsupported` if a frame's size differs from the first's
    ///   or libwebp cannot encode it (a side longer than 16,383 pixels), or `outOfMemory`.
    public static func webp(_ animation: Animation, quality: Int = 80) throws(ImageError) -> Data {
        var message = [CChar](repeating: 0, count: ImageDecoder.messageSize)
        let first = animation.frames[0].bitmap
        guard
            let encoder = cachalot_webp_animation_start(
                UInt32(clamping: first.width),
                UInt32(clamping: first.height),
                UInt32(clamping: animation.loopCount),
                Int32(min(100, max(0, quality))),
                &message,
                ImageDecoder.messageSize
            )
        else {
            try ImageDecoder.check(CACHALOT_IMAGE_UNSUPPORTED, message, "WebP")
            return Data()
        }
        for frame in animation.frames {
            let (seconds, attoseconds) = frame.duration.components
            // Clamped first: a duration of any length, or negative, must not overflow.
            let milliseconds = UInt32(
                clamping: min(max(seconds, -1), 5_000_000) * 1000 + attoseconds / 1_000_000_000_000_000
            )
            let status = frame.bitmap.withPixels { pixels in
                cachalot_webp_animation_add(encoder, pixels, milliseconds, &message, ImageDecoder.messageSize)
            }
            if status != CACHALOT_IMAGE_OK {
                _ = cachalot_webp_animation_finish(encoder, nil, nil, nil, 0)
                try ImageDecoder.check(status, message, "WebP")
            }
        }
        var output: UnsafeMutablePointer<UInt8>?
        var size = 0
        let status = cachalot_webp_animation_finish(encoder, &output, &size, &message, ImageDecoder.messageSize)
        try ImageDecoder.check(status, message, "WebP")
        guard let output else { return Data() }
        return Data(bytesNoCopy: output, count: size, deallocator: .free)
    }

    /// The bitmap as a JPEG at `quality` (1 to 100); alpha is dropped. A progressive JPEG comes
    /// in scans of increasing detail (libjpeg's default script): about as large, and its
    /// thumbnails skip most of its scans (see ``ImageDecoder/decode(_:scale:)``).
    ///
    /// - Parameters:
    ///   - bitmap: The pixels to encode.
    ///   - quality: From 1 to 100, clamped to that range. Default: 90.
    ///   - progressive: Whether to write a progressive JPEG. Default: `false`, baseline.
    /// - Throws: ``ImageError`` with code `corrupt` if libjpeg-turbo reports an error (such as a
    ///   side longer than 65,500 pixels, or memory it could not have).
    public static func jpeg(_ bitmap: Bitmap, quality: Int = 90, progressive: Bool = false) throws(ImageError) -> Data {
        let quality = Int32(min(100, max(1, quality)))
        return try Self.encoded(bitmap, "JPEG") { pixels, out, size, message in
            cachalot_jpeg_encode(pixels, quality, progressive ? 1 : 0, out, size, message, ImageDecoder.messageSize)
        }
    }

    /// The bitmap as a PNG, losslessly: gray, or RGBA with its alpha.
    ///
    /// - Throws: ``ImageError`` with code `outOfMemory` if libpng's structures could not be
    ///   allocated, or `corrupt` if libpng reports an error while writing.
    public static func png(_ bitmap: Bitmap) throws(ImageError) -> Data {
        try Self.encoded(bitmap, "PNG") { pixels, out, size, message in
            cachalot_png_encode(pixels, out, size, message, ImageDecoder.messageSize)
        }
    }

    /// The bitmap as a WebP: lossy at `quality` (0 to 100; libwebp's and Pillow's default is
    /// 80), or lossless. Alpha is kept if some pixel is not opaque.
    ///
    /// - Parameters:
    ///   - bitmap: The pixels to encode.
    ///   - quality: From 0 to 100, clamped to that range; ignored when `lossless`. Default: 80.
    ///   - lossless: Whether to encode losslessly. Default: `false`.
    /// - Throws: ``ImageError`` with code `unsupported` if libwebp cannot encode the bitmap (a side
    ///   longer than 16,383 pixels), or `outOfMemory`.
    public static func webp(_ bitmap: Bitmap, quality: Int = 80, lossless: Bool = false) throws(ImageError) -> Data {
        let quality = Int32(min(100, max(0, quality)))
        return try Self.encoded(bitmap, "WebP") { pixels, out, size, message in
            cachalot_webp_encode(pixels, quality, lossless ? 1 : 0, out, size, message, ImageDecoder.messageSize)
        }
    }

    /// The bitmap as an AVIF (4:2:0, 8 bits) at `quality` (0 to 100, mapped linearly onto AV1's
    /// quantizers 63 to 0) and `speed` (0, slowest and smallest, to 10). Alpha is kept, losslessly,
    /// if some pixel is not opaque.
    ///
    /// - Parameters:
    ///   - bitmap: The pixels to encode.
    ///   - quality: From 0 to 100, clamped to that range. Default: 60.
    ///   - speed: From 0 to 10, clamped to that range. Default: 8. The encoder runs on one thread.
    /// - Throws: ``ImageError`` with code `unsupported` if libavif (or the AV1 encoder it was built
    ///   with, if any) cannot encode the bitmap, or `outOfMemory`.
    public static func avif(_ bitmap: Bitmap, quality: Int = 60, speed: Int = 8) throws(ImageError) -> Data {
        let quality = Int32(min(100, max(0, quality)))
        let speed = Int32(min(10, max(0, speed)))
        return try Self.encoded(bitmap, "AVIF") { pixels, out, size, message in
            cachalot_avif_encode(pixels, quality, speed, out, size, message, ImageDecoder.messageSize)
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
        let status = bitmap.withPixels { pixels in encode(pixels, &output, &size, &message) }
        try ImageDecoder.check(status, message, format)
        guard let output else { return Data() }
        return Data(bytesNoCopy: output, count: size, deallocator: .free)
    }
}
