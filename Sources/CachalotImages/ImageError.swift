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
        /// Every image thread is busy and as many images as allowed wait already
        /// (``ImageWorkers/queueLimit``): nothing was tried; ask again later.
        case busy
    }

    /// The kind of failure, to compare or switch on.
    public let code: Code
    /// A sentence for a person: the format, and what the codec or the pipeline said.
    public let message: String

    /// Makes an error; the decoder, the encoder and the pipeline make these, and custom
    /// ``ImageProcessing`` types may too.
    ///
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - message: A sentence that says what went wrong.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The ``message``.
    public var description: String { self.message }
}
