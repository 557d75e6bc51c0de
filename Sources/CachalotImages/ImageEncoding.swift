/// A format to encode images in, with its quality: what ``ImageEncoder/encode(_:as:)-(Bitmap,_)`` makes.
public struct ImageEncoding: Sendable, Hashable, CustomStringConvertible {
    /// JPEG, PNG, WebP or AVIF (GIF is not encoded).
    public let format: ImageFormat
    /// From 0 to 100; PNG ignores it.
    public let quality: Int
    /// Whether an animated original (a GIF or WebP of more than one frame) gives an animated
    /// variant, every frame processed, with its durations and loop count. Only WebP animates;
    /// otherwise, and for a still original, the variant is the first frame.
    public let animates: Bool

    /// JPEG at `quality` (default 90); alpha is dropped.
    public static func jpeg(quality: Int = 90) -> Self { Self(format: .jpeg, quality: quality) }
    /// PNG, lossless.
    public static let png = Self(format: .png, quality: 100)
    /// Lossy WebP at `quality` (default 80, libwebp's and Pillow's), alpha kept; with `animates`,
    /// an animated original gives an animated WebP (see ``animates``), else its first frame.
    public static func webp(quality: Int = 80, animates: Bool = false) -> Self {
        Self(format: .webp, quality: quality, animates: animates)
    }
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

    private init(format: ImageFormat, quality: Int, animates: Bool = false) {
        self.format = format
        self.quality = min(100, max(0, quality))
        self.animates = animates
    }

    /// Names the format and quality, as in a variant's key: `webp:80`, `webp:80,animated`, `png`.
    public var description: String {
        if self.format == .png { return "png" }
        return "\(self.format.rawValue):\(self.quality)" + (self.animates ? ",animated" : "")
    }
}

/// An encoding chosen by the original once it is loaded: the original's own format where the
/// client takes it, say, or an animated WebP for an animated original.
///
/// ``ImagePipeline/encodedImage(for:processors:choosing:priority:)`` keeps what it makes under
/// ``name``, so that the same choice finds the variant again without loading the original.
public struct ImageEncodingChoice: Sendable, CustomStringConvertible {
    /// Names the choice in a variant's key, as ``ImageEncoding/description`` names an encoding:
    /// choices that may choose differently must have different names.
    public let name: String
    private let choose: @Sendable (Original) -> ImageEncoding

    /// What a choice knows of the original, read from its bytes without decoding its pixels.
    public struct Original: Sendable, Hashable {
        /// Its format; `nil` if it is not one the decoder knows by its first bytes.
        public var format: ImageFormat?
        /// Whether it is a GIF or WebP of more than one frame.
        public var isAnimated: Bool

        /// Describes an original.
        ///
        /// - Parameters:
        ///   - format: Its format, if the decoder knows it.
        ///   - isAnimated: Whether it has more than one frame. Default: `false`.
        public init(format: ImageFormat?, isAnimated: Bool = false) {
            self.format = format
            self.isAnimated = isAnimated
        }
    }

    /// Makes a choice.
    ///
    /// - Parameters:
    ///   - name: What the choice is called in a variant's key, such as `original(jpeg:90|png)`.
    ///   - choose: The encoding for an original.
    public init(name: String, _ choose: @escaping @Sendable (_ original: Original) -> ImageEncoding) {
        self.name = name
        self.choose = choose
    }

    /// Always `encoding`, named by its description.
    public static func always(_ encoding: ImageEncoding) -> Self {
        Self(name: encoding.description) { _ in encoding }
    }

    /// The best of `encodings`, listed best first, for the original: for an animated original,
    /// the first that ``ImageEncoding/animates``, if any; else the first. With no encodings,
    /// `otherwise`. Named `best(avif:60|webp:80,animated)`, or as the one encoding or `otherwise`
    /// it always comes to.
    public static func best(of encodings: [ImageEncoding], otherwise: Self) -> Self {
        guard let first = encodings.first else { return otherwise }
        guard let animated = encodings.first(where: \.animates), animated != first else { return .always(first) }
        let name = "best(" + encodings.map(\.description).joined(separator: "|") + ")"
        return Self(name: name) { $0.isAnimated ? animated : first }
    }

    /// The encoding for `original`.
    public func encoding(for original: Original) -> ImageEncoding { self.choose(original) }

    /// The name.
    public var description: String { self.name }
}
