import Cachalot
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
        /// The pipeline's variants, made earlier and expired, kept because their original, loaded
        /// again (and revalidated by the loader, if its rules say so), has the same bytes as when
        /// they were made: nothing was decoded or encoded. ``EncodedImage/original`` says where
        /// the original came from.
        case revalidated
    }

    /// The encoded bytes, ready to send or write.
    public let data: Data
    /// The format of ``data``: the one asked for, or, for stored bytes, the one their first bytes
    /// tell.
    public let format: ImageFormat
    /// When it stops being fresh: when its original did, as it was when the variant was made or
    /// last found unchanged; for an original without freshness, the moment it was answered.
    /// Not after the moment it was made if the original may not be stored (`no-store`, or
    /// `private` for a shared cache's loader): such a variant is not kept.
    public let expires: Date
    /// Whether the bytes were stored, kept after their original was loaded again, or made now.
    public let source: Source
    /// Where the original came from, when it was loaded for this answer (``Source/made`` and
    /// ``Source/revalidated``): from the origin, revalidated, or from the loader's tiers.
    /// `nil` for ``Source/stored``.
    public let original: Resource.Source?
    /// A weak entity tag (`W/"…"`) for the bytes, when they are stored: the same for every
    /// variant made from the same original bytes by the same processors and encoding, so that a
    /// downstream cache can revalidate with `If-None-Match`. `nil` for bytes that are not kept
    /// (their original may not be stored) or were stored before the original's digest was kept.
    public let entityTag: String?

    /// Makes an encoded image of `data`; the pipeline makes these, and tests and fakes may too.
    ///
    /// - Parameters:
    ///   - data: The encoded bytes.
    ///   - format: Their format.
    ///   - expires: When they stop being fresh.
    ///   - source: Whether they were stored or made now.
    ///   - original: Where the original came from, if it was loaded. Default: `nil`.
    ///   - entityTag: The bytes' weak entity tag, if they are stored. Default: `nil`.
    public init(
        data: Data,
        format: ImageFormat,
        expires: Date,
        source: Source,
        original: Resource.Source? = nil,
        entityTag: String? = nil
    ) {
        self.data = data
        self.format = format
        self.expires = expires
        self.source = source
        self.original = original
        self.entityTag = entityTag
    }
}
