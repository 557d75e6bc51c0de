import Foundation
import HTTPTypes

/// How long a variant stands, kept in its metadata: until its original stops being fresh, and
/// after that for as long as the original, loaded again (and so revalidated by the loader), has
/// not changed, as its validator tells.
///
/// An origin that sends only `Last-Modified` for a new file gives it no freshness worth the
/// name (a tenth of its age); a variant of it is still kept, and made again only when the
/// original changes.
struct VariantLife: Sendable, Equatable {
    /// When the variant stops being fresh: when its original did.
    var expiry: Date
    /// The original's validator: `E` and its `ETag`, else `L` and its `Last-Modified`; `nil`
    /// without either.
    var validator: String?

    init(expiry: Date, validator: String?) {
        self.expiry = expiry
        self.validator = validator
    }

    /// The validator of `response`, as kept.
    static func validator(of response: HTTPResponse) -> String? {
        if let tag = response.headerFields[.eTag], !tag.isEmpty { return "E" + tag }
        if let date = response.headerFields[.lastModified], !date.isEmpty { return "L" + date }
        return nil
    }

    /// Whether a variant with this life is worth keeping at `now`: while it is fresh, or after,
    /// if there is a validator to tell whether its original changed.
    func isKept(at now: Date) -> Bool {
        self.expiry > now || self.validator != nil
    }

    /// Whether a variant with this life still stands for an original whose life is `original`:
    /// both have the same validator.
    func stands(for original: VariantLife) -> Bool {
        self.validator != nil && self.validator == original.validator
    }

    /// As kept in a variant's metadata: `CIV1`, the expiry in whole seconds since 1970, then a
    /// space and the validator if there is one. Metadata written before validators were kept
    /// read back without one.
    var metadata: Data {
        Data(("CIV1 \(Int64(self.expiry.timeIntervalSince1970))" + (self.validator.map { " " + $0 } ?? "")).utf8)
    }

    /// The life kept in `metadata`, or `nil` if it is not one.
    init?(metadata: Data) {
        let text = String(decoding: metadata, as: UTF8.self)
        guard text.hasPrefix("CIV1 ") else { return nil }
        let fields = text.dropFirst(5).split(separator: " ", maxSplits: 1)
        guard let first = fields.first, let seconds = Int64(first) else { return nil }
        self.expiry = Date(timeIntervalSince1970: TimeInterval(seconds))
        self.validator = fields.count > 1 ? String(fields[1]) : nil
    }
}
