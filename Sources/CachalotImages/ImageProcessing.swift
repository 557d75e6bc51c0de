import Foundation

/// A step that makes a variant of an image, such as a thumbnail.
///
/// Its ``identifier`` is part of the variant's cache key, so two processors that can give
/// different pixels must have different identifiers; include every parameter. Add your own
/// processors by conforming to this protocol.
public protocol ImageProcessing: Sendable {
    /// Names the processor and its parameters, such as `thumbnail(256)`.
    var identifier: String { get }

    /// The smallest fraction of the source's size, in each dimension, that this processor needs
    /// to do as well as from the full image; the decoder may then decode at a reduced size (JPEG:
    /// 1/2, 1/4, 1/8). Default: 1, the full image.
    func requiredScale(sourceWidth: Int, sourceHeight: Int) -> Double

    /// The processed bitmap.
    ///
    /// The pipeline calls it on the concurrency pool, within its limit of concurrent decodes,
    /// with the bitmap the decoder or the processor before made.
    ///
    /// - Throws: Whatever the processor cannot do; the pipeline hands the error to its callers.
    func process(_ bitmap: Bitmap) throws -> Bitmap
}

extension ImageProcessing {
    /// 1: the processor needs the full image, so the decoder decodes it whole.
    public func requiredScale(sourceWidth: Int, sourceHeight: Int) -> Double { 1 }
}

/// Resizes to a box, in one of three ways, with the bicubic resampler (see ``Resize/process(_:)``).
public struct Resize: ImageProcessing {
    /// How the image meets the box.
    public enum Mode: String, Sendable, Hashable {
        /// Fits inside the box, keeping its aspect ratio: one side may come out shorter.
        case aspectFit = "fit"
        /// Covers the box, keeping its aspect ratio: one side may come out longer.
        case aspectFill = "fill"
        /// Covers the box, then is cut to it around the center: exactly the box.
        case crop
    }

    /// The box's width, in pixels; at least 1.
    public var width: Int
    /// The box's height, in pixels; at least 1.
    public var height: Int
    /// How the image meets the box. Default: `.aspectFit`.
    public var mode: Mode
    /// Whether an image smaller than the box is enlarged. Default: `false`.
    public var upscales: Bool

    /// Makes a resize to a `width` × `height` box.
    ///
    /// - Parameters:
    ///   - width: The box's width, in pixels.
    ///   - height: The box's height, in pixels.
    ///   - mode: How the image meets the box. Default: `.aspectFit`.
    ///   - upscales: Whether an image smaller than the box is enlarged. Default: `false`.
    /// - Precondition: `width` and `height` are positive.
    public init(width: Int, height: Int, mode: Mode = .aspectFit, upscales: Bool = false) {
        precondition(width > 0 && height > 0, "a box has at least one pixel")
        self.width = width
        self.height = height
        self.mode = mode
        self.upscales = upscales
    }

    /// `resize(WxH,mode)`, with `,up` when it upscales: `resize(640x360,fill)`.
    public var identifier: String {
        "resize(\(self.width)x\(self.height),\(self.mode.rawValue)\(self.upscales ? ",up" : ""))"
    }

    /// The scale at which the image meets the box, at most 1: a JPEG or WebP larger than the box
    /// may then be decoded at 1/2, 1/4 or 1/8, and a PNG or GIF shrunk as it is decoded.
    public func requiredScale(sourceWidth: Int, sourceHeight: Int) -> Double {
        min(1, self.scale(sourceWidth, sourceHeight))
    }

    /// Resamples with a bicubic filter widened when shrinking (Pillow's `BICUBIC`), after a box
    /// reduction by a whole factor when shrinking by more than 4 (Pillow's `reducing_gap` 2),
    /// alpha premultiplied. With `.crop`, the resized image is then cut to the box around its
    /// center. An image smaller than the box keeps its size unless ``upscales``.
    ///
    /// - Returns: A bitmap of the same ``Bitmap/PixelFormat``, at least 1 × 1.
    /// - Throws: Never, in this implementation; the signature is the protocol's.
    public func process(_ bitmap: Bitmap) throws -> Bitmap {
        let scale =
            self.upscales ? self.scale(bitmap.width, bitmap.height) : min(1, self.scale(bitmap.width, bitmap.height))
        let width = max(1, Int((Double(bitmap.width) * scale).rounded()))
        let height = max(1, Int((Double(bitmap.height) * scale).rounded()))
        let resized = Resampler.resize(bitmap, width: width, height: height)
        guard self.mode == .crop else { return resized }
        return Self.crop(resized, width: min(self.width, width), height: min(self.height, height))
    }

    /// The factor that makes a `width` × `height` image meet the box.
    private func scale(_ width: Int, _ height: Int) -> Double {
        let horizontal = Double(self.width) / Double(width)
        let vertical = Double(self.height) / Double(height)
        return self.mode == .aspectFit ? min(horizontal, vertical) : max(horizontal, vertical)
    }

    /// The centered `width` × `height` part of `bitmap`.
    static func crop(_ bitmap: Bitmap, width: Int, height: Int) -> Bitmap {
        if width == bitmap.width && height == bitmap.height { return bitmap }
        let x = (bitmap.width - width) / 2
        let y = (bitmap.height - height) / 2
        let size = bitmap.format.bytesPerPixel
        var pixels = Data(capacity: width * size * height)
        for row in y..<y + height {
            let start = bitmap.pixels.startIndex + row * bitmap.bytesPerRow + x * size
            pixels.append(bitmap.pixels[start..<start + width * size])
        }
        return Bitmap(width: width, height: height, format: bitmap.format, pixels: pixels)
    }
}

/// A thumbnail: the image fitted inside a square of ``maximumPixelSize``, never enlarged.
///
/// From a JPEG, the decoder does most of the shrinking (1/2, 1/4 or 1/8) before the resampler
/// finishes it, so a phone photo becomes a 256-pixel thumbnail without decoding every pixel; a
/// PNG or GIF is shrunk row by row as it is decoded, so its full-size bitmap is never held.
public struct Thumbnail: ImageProcessing {
    /// The longest side the thumbnail may have, in pixels; at least 1.
    public var maximumPixelSize: Int

    /// Makes a thumbnail that fits inside a `maximumPixelSize` square.
    ///
    /// - Precondition: `maximumPixelSize` is positive (checked when the thumbnail is used).
    public init(maximumPixelSize: Int) {
        self.maximumPixelSize = maximumPixelSize
    }

    /// `thumbnail(N)`, such as `thumbnail(256)`.
    public var identifier: String { "thumbnail(\(self.maximumPixelSize))" }

    private var resize: Resize { Resize(width: self.maximumPixelSize, height: self.maximumPixelSize) }

    /// The scale at which the longer side is ``maximumPixelSize``, at most 1.
    public func requiredScale(sourceWidth: Int, sourceHeight: Int) -> Double {
        self.resize.requiredScale(sourceWidth: sourceWidth, sourceHeight: sourceHeight)
    }

    /// The bitmap fitted inside the square with ``Resize``'s resampler; one that already fits is
    /// returned as it is.
    ///
    /// - Throws: Never, in this implementation; the signature is the protocol's.
    public func process(_ bitmap: Bitmap) throws -> Bitmap {
        try self.resize.process(bitmap)
    }
}
