import CachalotImages
import Foundation

/// What an image endpoint's path asks for (see ``ImageEndpoint``), read from the path after its
/// prefix.
struct ImageRequest: Sendable, Hashable {
    var signature: Substring
    /// `/<options>/<path>[?query]`: what the signature signs.
    var signed: Substring
    var width: Int?
    var height: Int?
    var mode: Resize.Mode = .aspectFit
    var quality: Int?
    /// `nil` for `auto`.
    var format: ImageFormat?
    /// The source: a path (with its query) on the origin, or a whole URL.
    var source: String

    /// Why a path is not an image request, said to the client.
    struct Invalid: Error {
        var message: String
    }

    /// Reads `target`, the request target after the endpoint's prefix.
    init(_ target: Substring) throws(Invalid) {
        guard let slash = target.firstIndex(of: "/") else { throw Invalid(message: "The path has no options.") }
        self.signature = target[..<slash]
        self.signed = target[slash...]
        let rest = target[target.index(after: slash)...]
        guard let end = rest.firstIndex(of: "/"), rest.index(after: end) < rest.endIndex else {
            throw Invalid(message: "The path names no image after its options.")
        }
        var source = String(rest[end...])
        // A whole URL, percent-encoded into the first segment.
        let first = source.dropFirst().prefix { $0 != "/" && $0 != "?" }
        if first.lowercased().hasPrefix("http%3a") || first.lowercased().hasPrefix("https%3a") {
            guard first.endIndex == source.endIndex, let decoded = first.removingPercentEncoding else {
                throw Invalid(message: "An encoded source URL must be the whole rest of the path.")
            }
            source = decoded
        }
        self.source = source
        let options = rest[..<end]
        guard options != "-" else { return }
        for token in options.split(separator: ",", omittingEmptySubsequences: false) {
            try self.read(token)
        }
        if self.mode != .aspectFit && (self.width == nil || self.height == nil) {
            throw Invalid(message: "fill and crop need both w and h.")
        }
    }

    private mutating func read(_ token: Substring) throws(Invalid) {
        let number = { (range: ClosedRange<Int>) throws(Invalid) -> Int in
            guard let value = Int(token.dropFirst()), range.contains(value), token.dropFirst().allSatisfy(\.isNumber)
            else {
                throw Invalid(message: "\"\(token)\" is out of range (\(range.lowerBound) to \(range.upperBound)).")
            }
            return value
        }
        switch token {
        case "fit": self.mode = .aspectFit
        case "fill": self.mode = .aspectFill
        case "crop": self.mode = .crop
        case "auto": self.format = nil
        case "jpg", "jpeg": self.format = .jpeg
        case "png": self.format = .png
        case "webp": self.format = .webp
        case "avif": self.format = .avif
        case _ where token.first == "w": self.width = try number(1...16_384)
        case _ where token.first == "h": self.height = try number(1...16_384)
        case _ where token.first == "q": self.quality = try number(0...100)
        default:
            throw Invalid(message: "\"\(token)\" is not an option: w<N>, h<N>, fit, fill, crop, q<N>, or a format.")
        }
    }

    /// The processors the options ask for: none, or one resize into the box.
    var processors: [any ImageProcessing] {
        guard self.width != nil || self.height != nil else { return [] }
        return [Resize(width: self.width ?? 16_384, height: self.height ?? 16_384, mode: self.mode)]
    }

    /// The encoding to answer in, at the quality asked for: the format asked for; else, of the
    /// formats the client takes (`accepted`, best first), an animated WebP for an animated
    /// original and the best for any other; else the original's own if every client takes it
    /// (JPEG), else PNG. WebP animates an animated original. The original is read once it is
    /// loaded, for the variant's first request only.
    func encodingChoice(accepted: [ImageFormat]) -> ImageEncodingChoice {
        if let format = self.format { return .always(self.encoding(format)) }
        let jpeg = self.encoding(.jpeg)
        let original = ImageEncodingChoice(name: "original(\(jpeg)|png)") { $0.format == .jpeg ? jpeg : .png }
        return .best(of: accepted.map(self.encoding), otherwise: original)
    }

    /// The encoding of `format` at the quality asked for.
    func encoding(_ format: ImageFormat) -> ImageEncoding {
        switch (format, self.quality) {
        case (.jpeg, let quality?): .jpeg(quality: quality)
        case (.webp, let quality): .webp(quality: quality ?? 80, animates: true)
        case (.avif, let quality?): .avif(quality: quality)
        default: ImageEncoding(format) ?? .png
        }
    }

    /// The formats `accept` (a request's `Accept` field) names with a quality above 0, best
    /// first: AVIF, then WebP. Wildcards do not count: a client that takes `*/*` may still not
    /// decode AVIF.
    static func accepted(_ accept: String?) -> [ImageFormat] {
        guard let accept else { return [] }
        var named: Set<String> = []
        for range in accept.split(separator: ",") {
            let parts = range.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let type = parts.first else { continue }
            let quality = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            if quality > 0 { named.insert(type) }
        }
        return [ImageFormat.avif, .webp].filter { named.contains($0.mediaType) }
    }
}
