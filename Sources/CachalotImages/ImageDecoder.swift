import CCachalotImageCodecs
import Foundation

/// Decodes PNG (libpng), JPEG (libjpeg-turbo), WebP (libwebp), AVIF (libavif) and GIF (giflib)
/// into ``Bitmap``s, telling the format by the data's first bytes.
///
/// - PNG of every kind (gray, gray with alpha, palette, RGB, RGBA; 1 to 16 bits a channel;
///   interlaced) becomes `.gray8` if it is gray without transparency, else `.rgba8`.
/// - JPEG (baseline, progressive) becomes `.gray8` if gray, else `.rgba8`. Its EXIF orientation
///   is applied: the bitmap is upright, as it is meant to be seen. CMYK JPEGs are refused.
/// - WebP (lossy, lossless, with alpha), AVIF (8 to 12 bits, any chroma subsampling, with alpha)
///   and GIF become `.rgba8`. An animated GIF or WebP gives its first frame as shown, on its whole
///   canvas; ``decodeAnimation(_:)`` gives every frame. AVIF's rotation and mirror properties
///   (`irot`, `imir`) are applied, as a JPEG's EXIF orientation is (ISO/IEC 23008-12:2022: the
///   rotation first, anticlockwise, then the mirror).
/// - A header declaring more than ``maximumPixelCount`` pixels is refused before the pixels are
///   allocated (a decompression bomb costs nothing), and so is an animation whose frames would
///   hold more than that all together. Damaged and truncated data are errors, never a crash; a
///   JPEG missing its end is an error, not a gray-filled picture.
public struct ImageDecoder: Sendable {
    /// The most pixels (width × height, as declared) an image may have, over all its frames for
    /// an animation. Default: 100 million, 400 MB as RGBA.
    public var maximumPixelCount: Int

    /// Makes a decoder.
    ///
    /// - Parameter maximumPixelCount: The most pixels an image may declare, over all its frames
    ///   for an animation. Default: 100 million (400 MB as RGBA).
    public init(maximumPixelCount: Int = 100_000_000) {
        self.maximumPixelCount = maximumPixelCount
    }

    /// Decodes the whole image (the first frame of an animation).
    ///
    /// - Throws: ``ImageError`` with code `unknownFormat` if the first bytes are not PNG, JPEG,
    ///   WebP, AVIF or GIF; `tooLarge` if the header declares more than ``maximumPixelCount``
    ///   pixels (before any are allocated); `truncated` if the data ends before the image does;
    ///   `unsupported` for what the decoder does not convert (such as a CMYK JPEG); `outOfMemory`
    ///   if the pixels could not be allocated; `corrupt` for other damage.
    public func decode(_ data: Data) throws(ImageError) -> Bitmap {
        try self.decode(data, scale: 1)
    }

    /// Decodes the image at a smaller size where the format makes that cheap, but at least
    /// `scale` of its full size in each dimension (1 is full size).
    ///
    /// JPEG decodes at 1/2, 1/4 or 1/8 inside the decoder, skipping most of the work: a 256-pixel
    /// thumbnail of a 4000-pixel photo needs only 1/8. At 1/8, a progressive JPEG skips more:
    /// the AC scans that a decode at 1/8 ignores are not decoded at all, for the same pixels. A
    /// WebP (still, or an animation's first frame that covers its canvas) is shrunk to `scale`
    /// itself, rounded up, by libwebp's area-averaging rescaler as it is decoded, as libvips does,
    /// when `scale` is 1/2 or less: the full-size picture is never held. PNG and GIF shrink by a whole factor with a box filter (colors weighted by
    /// alpha) as their rows are decoded, leaving at least twice `scale`: the reduction the
    /// resampler would make first (see ``Thumbnail``), without the full-size bitmap ever being
    /// held, except for an interlaced PNG. AVIF always decodes whole.
    ///
    /// - Parameters:
    ///   - data: The encoded image.
    ///   - scale: The least fraction of the full size wanted in each dimension, from 0 to 1; 1 (or
    ///     more) decodes at full size. The result may be larger than asked, never smaller.
    /// - Returns: The image at full size or smaller, oriented upright.
    /// - Throws: as ``decode(_:)``.
    public func decode(_ data: Data, scale: Double) throws(ImageError) -> Bitmap {
        let limit = UInt64(self.maximumPixelCount)
        let denominator = UInt32(Self.denominator(for: scale))
        let factor = UInt32(Self.reduction(for: scale))
        switch ImageFormat(sniffing: data) {
        case .png:
            return try Self.decoded(data, "PNG") { bytes, count, pixels, message in
                cachalot_png_decode(bytes, count, limit, factor, pixels, message, Self.messageSize)
            }
        case .jpeg:
            // At 1/8, a progressive JPEG is decoded without the AC scans it ignores (JPEGScans).
            let scans = denominator == 8 ? JPEGScans.withoutACScans(data) ?? data : data
            let bitmap = try Self.decoded(scans, "JPEG") { bytes, count, pixels, message in
                cachalot_jpeg_decode(bytes, count, limit, denominator, pixels, message, Self.messageSize)
            }
            return Orientation(exifIn: data).apply(to: bitmap)
        case .webp:
            return try Self.decoded(data, "WebP") { bytes, count, pixels, message in
                cachalot_webp_decode(bytes, count, limit, scale, pixels, message, Self.messageSize)
            }
        case .avif:
            var orientation: Int32 = 1
            let bitmap = try Self.decoded(data, "AVIF") { bytes, count, pixels, message in
                cachalot_avif_decode(bytes, count, limit, pixels, &orientation, message, Self.messageSize)
            }
            return Orientation(Int(orientation)).apply(to: bitmap)
        case .gif:
            return try Self.decoded(data, "GIF") { bytes, count, pixels, message in
                cachalot_gif_decode(bytes, count, limit, factor, pixels, message, Self.messageSize)
            }
        case nil:
            throw Self.unknownFormat
        }
    }

    /// Decodes every frame of an animated GIF or WebP, each as it is shown: composited onto the
    /// whole canvas, as an `.rgba8` bitmap. A still image of any format is one frame.
    ///
    /// - Throws: ``ImageError`` with code `tooLarge` if the frames together hold more than
    ///   ``maximumPixelCount`` pixels (each frame counting at least 256), before the frame that
    ///   would pass it is allocated; `truncated` if the data ends inside a frame (a GIF may end
    ///   without its trailer after a whole frame).
    public func decodeAnimation(_ data: Data) throws(ImageError) -> Animation {
        switch ImageFormat(sniffing: data) {
        case .gif: try self.animation(data, .gif, maximumFrames: 0)
        case .webp: try self.animation(data, .webp, maximumFrames: 0)
        case .png, .jpeg, .avif:
            Animation(frames: [.init(bitmap: try self.decode(data), duration: .zero)], loopCount: 0)
        case nil: throw Self.unknownFormat
        }
    }

    /// How many frames the image has: more than 1 for an animated GIF or WebP, else 1. Read from
    /// the GIF's records or the WebP's chunks without decoding any pixels.
    ///
    /// - Throws: ``ImageError`` with code `unknownFormat` if the first bytes are not a known
    ///   format; for a GIF or WebP, `truncated` or `corrupt` if its records or chunks cannot be
    ///   read (a GIF may end without its trailer after a whole frame, as ``decode(_:)`` allows).
    public func frameCount(of data: Data) throws(ImageError) -> Int {
        try self.frameCount(of: data, upTo: 0)
    }

    /// Whether the image is a GIF or WebP of more than one frame; `false` if its frames cannot be
    /// counted (the decoder then says why). A GIF's records are read up to its second frame only.
    func isAnimated(_ data: Data) -> Bool {
        let format = ImageFormat(sniffing: data)
        guard format == .gif || format == .webp else { return false }
        return ((try? self.frameCount(of: data, upTo: 2)) ?? 1) > 1
    }

    /// ``frameCount(of:)``, counting a GIF's frames up to `maximum` (0: all).
    private func frameCount(of data: Data, upTo maximum: UInt32) throws(ImageError) -> Int {
        var count: UInt32 = 0
        var message = [CChar](repeating: 0, count: Self.messageSize)
        let format = ImageFormat(sniffing: data)
        let status = data.withUnsafeBytes { bytes in
            let start = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
            return switch format {
            case .gif: cachalot_gif_frame_count(start, bytes.count, maximum, &count, &message, Self.messageSize)
            case .webp: cachalot_webp_frame_count(start, bytes.count, &count, &message, Self.messageSize)
            case .png, .jpeg, .avif, nil: CACHALOT_IMAGE_OK
            }
        }
        guard let format else { throw Self.unknownFormat }
        try Self.check(status, message, format == .gif ? "GIF" : "WebP")
        return max(1, Int(count))
    }

    /// The width and height the image will have once decoded whole (for JPEG, once oriented;
    /// for an animation, its canvas), read from its header.
    ///
    /// Nothing is decoded: the pipeline reads it to choose the scale to decode at. The size is as
    /// declared, whether or not the image would pass ``maximumPixelCount``.
    ///
    /// - Throws: ``ImageError`` with code `unknownFormat` if the first bytes are not a known
    ///   format; `truncated` if the data ends inside the header; `corrupt` (or what the codec
    ///   reports) if the header cannot be read.
    public func size(of data: Data) throws(ImageError) -> (width: Int, height: Int) {
        let number = { (offset: Int, bytes: Int, bigEndian: Bool) in
            let field = data[data.startIndex + offset..<data.startIndex + offset + bytes]
            return (bigEndian ? Array(field) : field.reversed()).reduce(0) { $0 << 8 | Int($1) }
        }
        switch ImageFormat(sniffing: data) {
        case .png:
            // IHDR is the first chunk: width and height at bytes 16 and 20, big-endian.
            guard data.count >= 24 else { throw ImageError(.truncated, "PNG: the data ends inside its header") }
            return (number(16, 4, true), number(20, 4, true))
        case .gif:
            // The logical screen: width and height at bytes 6 and 8, little-endian.
            guard data.count >= 10 else { throw ImageError(.truncated, "GIF: the data ends inside its header") }
            return (number(6, 2, false), number(8, 2, false))
        case .jpeg:
            let size = try Self.headerSize(data, "JPEG", cachalot_jpeg_size)
            return Orientation(exifIn: data).swapsAxes ? (size.height, size.width) : size
        case .webp:
            return try Self.headerSize(data, "WebP", cachalot_webp_size)
        case .avif:
            return try Self.headerSize(data, "AVIF", cachalot_avif_size)
        case nil:
            throw Self.unknownFormat
        }
    }

    private static let unknownFormat = ImageError(
        .unknownFormat,
        "the data is not PNG, JPEG, WebP, AVIF or GIF (by its first bytes)"
    )

    /// The size a C codec reads from a header.
    private static func headerSize(
        _ data: Data,
        _ format: String,
        _ read: (
            UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<UInt32>, UnsafeMutablePointer<UInt32>,
            UnsafeMutablePointer<CChar>, Int
        ) -> cachalot_image_status
    ) throws(ImageError) -> (width: Int, height: Int) {
        var width: UInt32 = 0
        var height: UInt32 = 0
        var message = [CChar](repeating: 0, count: Self.messageSize)
        let status = data.withUnsafeBytes { bytes in
            read(
                bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                bytes.count,
                &width,
                &height,
                &message,
                Self.messageSize
            )
        }
        try Self.check(status, message, format)
        return (Int(width), Int(height))
    }

    /// Decodes up to `maximumFrames` frames (0: all) of a GIF or WebP.
    private func animation(_ data: Data, _ format: ImageFormat, maximumFrames: UInt32) throws(ImageError) -> Animation {
        let limit = UInt64(self.maximumPixelCount)
        var animation = cachalot_animation()
        var message = [CChar](repeating: 0, count: Self.messageSize)
        let status = data.withUnsafeBytes { bytes in
            let start = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
            return format == .gif
                ? cachalot_gif_decode_animation(
                    start,
                    bytes.count,
                    limit,
                    maximumFrames,
                    &animation,
                    &message,
                    Self.messageSize
                )
                : cachalot_webp_decode_animation(
                    start,
                    bytes.count,
                    limit,
                    maximumFrames,
                    &animation,
                    &message,
                    Self.messageSize
                )
        }
        try Self.check(status, message, format == .gif ? "GIF" : "WebP")
        defer { cachalot_animation_free(&animation) }
        var frames: [Animation.Frame] = []
        frames.reserveCapacity(Int(animation.frame_count))
        for index in 0..<Int(animation.frame_count) {
            // The bitmap takes the frame's pixels; cachalot_animation_free skips a NULL.
            let bitmap = Bitmap(owning: animation.frames[index])
            animation.frames[index].pixels = nil
            frames.append(.init(bitmap: bitmap, duration: .milliseconds(animation.durations[index])))
        }
        return Animation(frames: frames, loopCount: Int(animation.loop_count))
    }

    /// The largest of 1, 2, 4 and 8 that keeps at least `scale` of the size.
    static func denominator(for scale: Double) -> Int {
        [8, 4, 2].first { 1 / Double($0) >= scale } ?? 1
    }

    /// The whole factor a box filter may shrink by for `scale`, leaving at least twice it, as
    /// ``Resampler`` does before its bicubic filter: 1 for a scale over 1/4.
    static func reduction(for scale: Double) -> Int {
        guard scale <= 1 / 4 else { return 1 }
        return scale > 0 ? Int(min(1 / scale / 2, 65_536)) : 65_536
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
        return Bitmap(owning: pixels)
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
