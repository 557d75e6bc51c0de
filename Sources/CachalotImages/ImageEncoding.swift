/// A format to encode images in, with its quality: what ``ImageEncoder/encode(_:as:)`` makes.
public struct ImageEncoding: Sendable, Hashable, CustomStringConvertible {
    /// JPEG, PNG, WebP or AVIF (GIF is not encoded).
    public let format: ImageFormat
    /// From 0 to 100; PNG ignores it.
    public let quality: Int

    /// JPEG at `quality` (default 90); alpha is dropped.
    public static func jpeg(quality: Int = 90) -> Self { Self(format: .jpeg, quality: quality) }
    /// PNG, lossless.
    public static let png = Self(format: .png, quality: 100)
    /// Lossy WebP at `quality` (default 80, libwebp's and Pillow's), alpha kept.
    public static func webp(quality: Int = 80) -> Self { Self(format: .webp, quality: quality) }
    /// AVIF at `quality` (default 60) and speed 8, alpha kept.
    public static func avif(quality: Int = 60) -> Self { Self(format: .avif, quality: quality) }

    /// The default encoding of `format`; `nil` for GIF.
    public init?(_ format: ImageFormat) {
        switch format {
        case .jpeg: self = .jpeg()
        case .png: self = .png
        case .webp: self = .webp()
        case .avif: self = .avif()
        case .gif: return nil
        }
    }

    private init(format: ImageFormat, quality: Int) {
        self.format = format
        self.quality = min(100, max(0, quality))
    }

    /// Names the format and quality, as in a variant's key: `webp:80`, `png`.
    public var description: String { self.format == .png ? "png" : "\(self.format.rawValue):\(self.quality)" }
}

/// An encoding chosen by the original's format once the original is loaded: the original's own
/// format where the client takes it, say.
///
/// ``ImagePipeline/encodedImage(for:processors:choosing:priority:)`` keeps what it makes under
/// ``name``, so that the same choice finds the variant again without loading the original.
public struct ImageEncodingChoice: Sendable, CustomStringConvertible {
    /// Names the choice in a variant's key, as ``ImageEncoding/description`` names an encoding:
    /// choices that may choose differently must have different names.
    public let name: String
    private let choose: @Sendable (ImageFormat?) -> ImageEncoding

    /// Makes a choice.
    ///
    /// - Parameters:
    ///   - name: What the choice is called in a variant's key, such as `original(jpeg:90|png)`.
    ///   - choose: The encoding for an original of a format (`nil` if it is not one the decoder
    ///     knows by its first bytes).
    public init(name: String, _ choose: @escaping @Sendable (_ original: ImageFormat?) -> ImageEncoding) {
        self.name = name
        self.choose = choose
    }

    /// Always `encoding`, named by its description.
    public static func always(_ encoding: ImageEncoding) -> Self {
        Self(name: encoding.description) { _ in encoding }
    }

    /// The encoding for an original of `format`.
    public func encoding(forOriginal format: ImageFormat?) -> ImageEncoding { self.choose(format) }

    /// The name.
    public var description: String { self.name }
}
