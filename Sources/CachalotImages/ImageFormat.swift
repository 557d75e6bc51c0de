import Foundation

/// An image format, told by the data's first bytes, never by a file name or a Content-Type.
public enum ImageFormat: String, Sendable, Hashable, CaseIterable {
    /// PNG, decoded with libpng and encoded losslessly.
    case png
    /// JPEG, decoded and encoded with libjpeg-turbo.
    case jpeg
    /// GIF, still or animated, decoded with giflib; never encoded.
    case gif
    /// WebP, lossy or lossless, still or animated, decoded and encoded with libwebp.
    case webp
    /// AVIF, decoded and encoded with libavif.
    case avif

    /// The format whose signature `data` starts with, or `nil`.
    ///
    /// AVIF is an ISO media file whose `ftyp` box names the `avif` or `avis` brand, as its major
    /// brand or a compatible one; other HEIF files (such as HEIC) are not AVIF.
    public init?(sniffing data: Data) {
        let bytes = data.prefix(64)
        let at = { (offset: Int, text: String) -> Bool in
            bytes.dropFirst(offset).starts(with: Array(text.utf8))
        }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            self = .png
        } else if bytes.starts(with: [0xFF, 0xD8, 0xFF]) {
            self = .jpeg
        } else if at(0, "GIF87a") || at(0, "GIF89a") {
            self = .gif
        } else if at(0, "RIFF") && at(8, "WEBP") {
            self = .webp
        } else if at(4, "ftyp") && Self.namesAVIF(bytes) {
            self = .avif
        } else {
            return nil
        }
    }

    /// Whether the `ftyp` box at the start of `bytes` names `avif` or `avis`: its major brand at
    /// 8, its compatible brands from 16 to the box's end (as far as `bytes` go).
    private static func namesAVIF(_ bytes: Data) -> Bool {
        guard bytes.count >= 12 else { return false }
        let start = bytes.startIndex
        let size = bytes[start..<start + 4].reduce(0) { $0 << 8 | Int($1) }
        let end = min(bytes.count, max(12, size))
        let brands = [8] + Array(stride(from: 16, to: end - 3, by: 4))
        return brands.contains { offset in
            let brand = bytes[start + offset..<start + offset + 4]
            return brand.elementsEqual("avif".utf8) || brand.elementsEqual("avis".utf8)
        }
    }

    /// The media type, as in `Content-Type`: `image/png`, `image/jpeg`, …
    public var mediaType: String { "image/\(self.rawValue)" }

    /// The usual file name extension, without its dot.
    public var fileExtension: String { self == .jpeg ? "jpg" : self.rawValue }
}
