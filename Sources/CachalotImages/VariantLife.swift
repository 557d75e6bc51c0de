import Crypto
import Foundation

/// How long a variant stands, kept in its metadata: until its original stops being fresh, and
/// after that for as long as the original, loaded again (and so revalidated by the loader), is
/// the same: the same bytes, by their SHA-256.
///
/// The bytes decide, not the original's validators: a weak `ETag`, or a `Last-Modified` of one
/// second's resolution, can stay the same across a change. An origin that sends a new file with
/// `Last-Modified` alone gives it no freshness worth the name (a tenth of its age); a variant of
/// it is still kept, and made again only when the original changes.
struct VariantLife: Sendable, Equatable {
    /// When the variant stops being fresh: when its original did.
    var expiry: Date
    /// The SHA-256 of the original's bytes, in hexadecimal; `nil` in metadata written before
    /// it was kept.
    var original: String?

    /// The latest expiry kept: the end of year 9999, as far as HTTP dates go.
    static let latestExpiry = Date(timeIntervalSince1970: 253_402_300_799)

    init(expiry: Date, original: String?) {
        self.expiry = min(expiry, Self.latestExpiry)
        self.original = original
    }

    /// The identity of an original's bytes.
    static func digest(of body: Data) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(2 * SHA256.byteCount)
        for byte in SHA256.hash(data: body) {
            text.append(Self.digits[Int(byte &>> 4)])
            text.append(Self.digits[Int(byte & 0x0F)])
        }
        // Not String(format:): an image hit takes a digest, and formatting cost a tenth of it.
        return String(decoding: text, as: UTF8.self)
    }

    private static let digits = Array("0123456789abcdef".utf8)

    /// A weak entity tag for the variant stored under `key` with this life: the same for every
    /// variant made from the same original bytes by the same processors and encoding (the key
    /// names them), wherever it was made; `nil` without the original's digest.
    func entityTag(forKey key: String) -> String? {
        self.original.map { "W/\"" + Self.digest(of: Data((key + "\n" + $0).utf8)).prefix(32) + "\"" }
    }

    /// Whether a variant with this life is worth keeping at `now`: while it is fresh, or after,
    /// if its original's bytes are known, to tell whether it changed.
    func isKept(at now: Date) -> Bool {
        self.expiry > now || self.original != nil
    }

    /// Whether a variant with this life still stands for an original whose life is `current`:
    /// made from the same bytes.
    func stands(for current: VariantLife) -> Bool {
        self.original != nil && self.original == current.original
    }

    /// As kept in a variant's metadata: `CIV2`, the expiry in whole seconds since 1970, then a
    /// space and the original's digest if it is known. `CIV1` metadata, written before, has the
    /// expiry alone.
    var metadata: Data {
        let seconds = Int64(self.expiry.timeIntervalSince1970.rounded(.down))
        return Data(("CIV2 \(seconds)" + (self.original.map { " " + $0 } ?? "")).utf8)
    }

    /// The life kept in `metadata`, or `nil` if it is not one. The disk may have been written by
    /// anyone: an expiry outside 1970 to 9999 or a digest that is not 64 hexadecimal digits is
    /// not one.
    init?(metadata: Data) {
        guard metadata.count <= 128 else { return nil }
        let text = String(decoding: metadata, as: UTF8.self)
        let fields = text.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count >= 2, fields[0] == "CIV1" || fields[0] == "CIV2", let seconds = Int64(fields[1]),
            (0...Int64(Self.latestExpiry.timeIntervalSince1970)).contains(seconds)
        else { return nil }
        self.expiry = Date(timeIntervalSince1970: TimeInterval(seconds))
        self.original = nil
        if fields[0] == "CIV2", fields.count == 3 {
            let digest = fields[2]
            let isHexadecimal = digest.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
            guard digest.utf8.count == 64, isHexadecimal else { return nil }
            self.original = String(digest)
        } else if fields.count != 2 {
            return nil
        }
    }
}
