@_spi(Fuzzing) import Cachalot
import Foundation

extension FuzzTarget {
    /// The most pixels an image may declare in ``image(_:)``: 2²⁰, so that each input decodes in
    /// milliseconds. The limit is a setting of the decoder; its check is the same for any value.
    static let imagePixelLimit = 1 << 20

    /// Decodes `bytes` as an image with ``ImageDecoder`` (PNG, JPEG, WebP, AVIF or GIF, told by the
    /// first bytes), whole, at 1/8 and as an animation, with a limit of ``imagePixelLimit`` pixels,
    /// and reads its size from its header alone.
    ///
    /// Invariants, for bytes that decode whole:
    /// - the bitmap has at most the limit's pixels (a larger image is refused before decoding);
    /// - the size read from the header alone is the bitmap's (for JPEG, oriented upright);
    /// - at 1/8, a bitmap has at most the pixels of the whole image;
    /// - an animation's frames hold at most the limit's pixels together, all have the canvas's
    ///   size, and its first frame is the still image; the frames counted without decoding are
    ///   as many.
    ///
    /// ``Bitmap``'s own preconditions check that its rows hold its pixels; its last pixel is
    /// read, and has the bytes of its format.
    public static func image(_ bytes: UnsafeRawBufferPointer) {
        let data = Data(bytes)
        let decoder = ImageDecoder(maximumPixelCount: Self.imagePixelLimit)
        let whole = try? decoder.decode(data)
        let eighth = try? decoder.decode(data, scale: 1.0 / 8)
        let size = try? decoder.size(of: data)
        let animation = try? decoder.decodeAnimation(data)
        let frameCount = try? decoder.frameCount(of: data)
        for bitmap in [whole, eighth].compactMap(\.self) {
            let pixel = bitmap.pixel(x: bitmap.width - 1, y: bitmap.height - 1)
            precondition(pixel.count == bitmap.format.bytesPerPixel, "a pixel of \(pixel.count) bytes")
            precondition(
                !bitmap.hasTransparency || (bitmap.format == .rgba8 && bitmap.bytesPerRow >= bitmap.width * 4),
                "a bitmap without alpha has transparency"
            )
        }
        guard let whole else { return }
        precondition(whole.width * whole.height <= Self.imagePixelLimit, "a decoded image is larger than the limit")
        guard let size else { preconditionFailure("an image decodes, but its size cannot be read") }
        precondition(
            size == (whole.width, whole.height),
            "the size \(size) read from the header is not the decoded \(whole.width)x\(whole.height)"
        )
        if let animation {
            precondition(
                animation.frames.reduce(0) { $0 + $1.bitmap.width * $1.bitmap.height } <= Self.imagePixelLimit,
                "an animation's frames hold more than the limit"
            )
            precondition(
                animation.frames.allSatisfy { $0.bitmap.width == whole.width && $0.bitmap.height == whole.height },
                "a frame is not the canvas's size"
            )
            precondition(animation.frames[0].bitmap == whole, "the first frame is not the still image")
            precondition(
                frameCount == animation.frames.count,
                "\(animation.frames.count) frames decode, but \(frameCount.map(String.init) ?? "none") are counted"
            )
        }
        if let eighth {
            precondition(
                eighth.width <= whole.width && eighth.height <= whole.height,
                "an image decoded at 1/8 is larger than the whole"
            )
        }
    }
}
