import Cachalot
import CachalotImages
import Crypto
import Foundation

/// The proxy's image endpoint, in the spirit of imgproxy: a path under ``prefix`` names a
/// signature, processing options and an image on the origin; the proxy answers with the image
/// resized and in the format the client takes best.
///
/// ```
/// GET /_image/<signature>/<options>/<path on the origin>[?query]
/// GET /_image/oKfUtW9…/w256,h256,fill/photos/cat.jpg
/// ```
///
/// - `<options>`: tokens separated by commas: `w<N>` and `h<N>`, the box (1 to 16384; one alone
///   bounds that side only); `fit` (default), `fill` or `crop`; `q<N>`, the quality (0 to 100);
///   `jpeg`, `png`, `webp`, `avif` or `auto` (default: for an animated GIF or WebP, an animated
///   WebP if the client's `Accept` names `image/webp`; else AVIF if it names `image/avif`, else
///   WebP if it names `image/webp`, else JPEG for a JPEG and PNG for any other; such answers
///   carry `Vary: Accept`); `-` alone for none. `webp` keeps an animation: every frame resized,
///   with its durations and loop count, under the decoder's pixel limit over all frames; the
///   other formats take the first frame.
/// - `<path on the origin>`: a path and query on the configured origin, or a whole URL
///   percent-encoded into one segment (`http%3A%2F%2F…`), which must be on the origin: any
///   other source is refused with 403.
/// - `<signature>`: the unpadded base64url HMAC-SHA256, under ``Signing/key(_:)``, of everything
///   after it: `/<options>/<path>[?query]` (see ``signature(of:key:)``). A missing or wrong one
///   is refused with 403; with ``Signing/disabled``, the signature is the word `unsafe`.
///
/// Variants are kept like responses, fresh as long as their original is, and the answers
/// carry `Cache-Control: public, max-age` for that time and `Cache-Status`.
public struct ImageEndpoint: Sendable {
    /// How image URLs are signed.
    public enum Signing: Sendable {
        /// Every URL carries the HMAC-SHA256 of its options and source under this key.
        case key(Data)
        /// No signature: the URL says `unsafe` in its place. Anyone can then make the proxy
        /// decode and resize any image of the origin, at any size the limits allow.
        case disabled
    }

    /// Where the endpoint's paths start; it starts and ends with `/` and names a path. Default:
    /// `/_image/`.
    public var prefix: String
    /// How image URLs are signed: with a key of at least 16 bytes, or ``Signing/disabled``. No
    /// default: an endpoint without signatures must say so.
    public var signing: Signing
    /// Where variants are kept, such as a `DiskCache` of their own. No default.
    public var variants: any DataCaching
    /// The most bytes an original may have; a larger one is answered with 422, not decoded.
    /// Must be positive. Default: 32 MiB.
    public var maximumSourceSize: Int
    /// The most pixels an original may declare (over all its frames); a larger one is refused
    /// with 422 before it is decoded. Must be positive. Default: 50 million.
    public var maximumPixelCount: Int
    /// How many images are decoded, resized and encoded at once, on threads of the endpoint's
    /// own, never on the event loops and cooperative threads that carry the proxy's misses and
    /// health checks.
    /// Must be positive. Default: `ImageWorkers.defaultThreadCount`, one fewer than the active
    /// processors and at least one.
    public var threads: Int
    /// The most images that may wait for a thread; past it, the endpoint answers 503 with
    /// `Retry-After`. Must not be negative. Default: 16.
    public var queueLimit: Int

    /// Makes an image endpoint for ``CacheServer/Configuration/images``.
    ///
    /// The values are checked when the server is made:
    /// ``CacheServer/init(configuration:loader:group:logger:)`` throws a ``ServerError`` for a
    /// prefix that does not start and end with `/`, a key shorter than 16 bytes, or a limit that
    /// is not positive.
    ///
    /// - Parameters:
    ///   - prefix: Where the endpoint's paths start. Default: `/_image/`.
    ///   - signing: How URLs are signed.
    ///   - variants: Where variants are kept.
    ///   - maximumSourceSize: The most bytes an original may have. Default: 32 MiB.
    ///   - maximumPixelCount: The most pixels an original may declare. Default: 50 million.
    ///   - threads: How many images are worked on at once. Default:
    ///     `ImageWorkers.defaultThreadCount`.
    ///   - queueLimit: The most images waiting for a thread. Default: 16.
    public init(
        prefix: String = "/_image/",
        signing: Signing,
        variants: any DataCaching,
        maximumSourceSize: Int = 32 << 20,
        maximumPixelCount: Int = 50_000_000,
        threads: Int = ImageWorkers.defaultThreadCount,
        queueLimit: Int = 16
    ) {
        self.prefix = prefix
        self.signing = signing
        self.variants = variants
        self.maximumSourceSize = maximumSourceSize
        self.maximumPixelCount = maximumPixelCount
        self.threads = threads
        self.queueLimit = queueLimit
    }

    /// The signature of `signed`, the part of an image path after its signature
    /// (`/<options>/<path>[?query]`), under `key`: unpadded base64url of its HMAC-SHA256.
    ///
    /// For a program outside the proxy that makes image URLs; ``path(for:options:)`` puts the
    /// whole path together.
    public static func signature(of signed: String, key: Data) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data(signed.utf8), using: SymmetricKey(data: key))
        return Data(code).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The path that asks for `source` (a path on the origin, with its query) with `options`,
    /// signed as `signing` says: `prefix` + signature + `/` + options + source.
    ///
    /// ```swift
    /// let path = endpoint.path(for: "/photos/cat.jpg", options: "w256,h256,fill")
    /// ```
    ///
    /// - Parameters:
    ///   - source: A path and query on the origin (a missing leading `/` is added), or a whole
    ///     URL on the origin, percent-encoded into one segment.
    ///   - options: The processing options, such as `w256,h256,fill`, or `-` for none. They are
    ///     not checked here: a request with invalid options is answered with 400.
    public func path(for source: String, options: String) -> String {
        let signed = "/" + options + (source.hasPrefix("/") ? source : "/" + source)
        switch self.signing {
        case .key(let key): return self.prefix + Self.signature(of: signed, key: key) + signed
        case .disabled: return self.prefix + "unsafe" + signed
        }
    }

    /// Whether `signature` signs `signed`, compared in constant time.
    func verifies(_ signature: Substring, of signed: Substring) -> Bool {
        switch self.signing {
        case .disabled:
            return signature == "unsafe"
        case .key(let key):
            var base64 = signature.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
            guard let code = Data(base64Encoded: base64) else { return false }
            return HMAC<SHA256>.isValidAuthenticationCode(
                code,
                authenticating: Data(signed.utf8),
                using: SymmetricKey(data: key)
            )
        }
    }

    func validate() throws(ServerError) {
        guard self.prefix.hasPrefix("/"), self.prefix.hasSuffix("/"), self.prefix.count > 2 else {
            throw ServerError(
                "The image endpoint's prefix \"\(self.prefix)\" must start and end with / and name a path."
            )
        }
        if case .key(let key) = self.signing, key.count < 16 {
            throw ServerError("The image endpoint's signing key must have at least 16 bytes.")
        }
        guard self.maximumSourceSize > 0, self.maximumPixelCount > 0, self.threads > 0, self.queueLimit >= 0 else {
            throw ServerError(
                "The image endpoint's limits and threads must be positive, and its queue limit not negative."
            )
        }
    }
}
