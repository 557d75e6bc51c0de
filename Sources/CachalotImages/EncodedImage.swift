import Foundation

/// A variant's bytes in the format asked for, as
/// ``ImagePipeline/encodedImage(for:processors:encoding:priority:)`` hands them out.
public struct EncodedImage: Sendable, Hashable {
    /// Where the bytes came from.
    public enum Source: Sendable, Hashable {
        /// The pipeline's variants, made earlier and still fresh.
        case stored
        /// Made now from the original.
        case made
    }

    public let data: Data
    public let format: ImageFormat
    /// When it stops being fresh: when its original did, as it was when the variant was made.
    /// Not after the moment it was made if the original may not be stored (`no-store`, or
    /// `private` for a shared cache's loader): such a variant is not kept.
    public let expires: Date
    public let source: Source

    public init(data: Data, format: ImageFormat, expires: Date, source: Source) {
        self.data = data
        self.format = format
        self.expires = expires
        self.source = source
    }
}
