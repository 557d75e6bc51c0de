/// Why an image could not be decoded, encoded or loaded.
public struct ImageError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public enum Code: Hashable, Sendable {
        /// The data is not a PNG, JPEG, WebP, AVIF or GIF (formats are told by their first bytes).
        case unknownFormat
        /// The data is damaged.
        case corrupt
        /// The data ends before the image does.
        case truncated
        /// The header declares more pixels than ``ImageDecoder/maximumPixelCount``.
        case tooLarge
        /// The image uses something the decoder does not convert, such as CMYK JPEG.
        case unsupported
        /// The memory for the pixels could not be had.
        case outOfMemory
        /// The server answered with this status, not an image.
        case status(Int)
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { self.message }
}
