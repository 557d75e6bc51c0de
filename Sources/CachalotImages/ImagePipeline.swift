import Cachalot
import Foundation
import HTTPTypes
import Synchronization

/// Loads images as decoded, processed bitmaps: from memory, else the processed variant's bytes
/// from disk, else the original's bytes through a `ResourceLoader` (memory, disk, network),
/// decoded and processed.
///
/// ```swift
/// let pipeline = try ImagePipeline(loader: loader, variants: DiskCache(directory: variantsURL))
/// let thumbnail = try await pipeline.image(for: url, processors: [Thumbnail(maximumPixelSize: 256)])
/// ```
///
/// What is kept where:
/// - Memory holds bitmaps by their real cost, `bytesPerRow × height`: the original under its
///   URL, a variant under its ``key(for:processors:)``.
/// - The original's bytes are kept by the loader, by HTTP's rules (a `no-store` image is not).
/// - A variant's bytes are kept in `variants`, in ``Configuration/variantEncoding``; by default
///   as PNG if the source was PNG or the variant has transparency, else as JPEG at
///   ``Configuration/jpegQuality``. A variant lasts as long as its original was fresh when it
///   was made; after that, the original is loaded again through the loader (which revalidates
///   it) and the variant is made again.
/// - ``encodedImage(for:processors:encoding:priority:)`` hands out a variant's bytes in a
///   format asked for (a server's or a command's output), kept in `variants` under a key of
///   their own.
///
/// Identical requests in flight share one load, decode and processing; each caller may cancel
/// on its own, and the work stops when the last caller goes. Decoding, processing and encoding
/// run on the pipeline's own threads (``workers``), never on Swift's cooperative pool, which
/// carries everything else a program awaits: at most ``Configuration/maximumConcurrentDecodes``
/// at once, with at most ``Configuration/maximumQueuedDecodes`` waiting. Work whose callers have
/// all gone is dropped before it starts, and between decoding and encoding.
public final class ImagePipeline: Sendable {
    /// How a pipeline keeps bitmaps, decodes and stores variants. Every property has a default;
    /// ``ImagePipeline/init(loader:variants:configuration:now:)`` checks them.
    ///
    /// ```swift
    /// let configuration = ImagePipeline.Configuration(memoryCostLimit: 256 << 20, variantEncoding: .webp())
    /// ```
    public struct Configuration: Sendable {
        /// The most memory the decoded bitmaps may hold, in bytes. Default: `nil`, the
        /// `MemoryCache` default (a share of the machine's memory). As in any `MemoryCache`, one
        /// bitmap may take at most a tenth of it; a larger one is answered but not kept.
        public var memoryCostLimit: Int?
        /// How many images may be decoded, processed or encoded at once: the pipeline's threads;
        /// at least 1. Default: ``ImageWorkers/defaultThreadCount``, one fewer than the active
        /// processors and at least one.
        public var maximumConcurrentDecodes: Int
        /// The most images that may wait for a thread; one more is refused with an
        /// ``ImageError`` of code ``ImageError/Code/busy``. Default: `nil`, no limit.
        public var maximumQueuedDecodes: Int?
        /// The decoder, with its limit on declared pixels. Default: `ImageDecoder()`, at most 100
        /// million pixels.
        public var decoder: ImageDecoder
        /// The quality of JPEG variants (1 to 100) when ``variantEncoding`` is `nil`. Default: 90.
        public var jpegQuality: Int
        /// How variants are kept in `variants`, such as `.webp()`, smaller than JPEG for the same
        /// look. Default: `nil`, PNG if the source was PNG or the variant has transparency, else
        /// JPEG at ``jpegQuality``.
        public var variantEncoding: ImageEncoding?
        /// The most bytes an original may have; a larger one is an ``ImageError`` with code
        /// `tooLarge`, before it is decoded. Default: `nil`, no limit but the loader's.
        public var maximumSourceSize: Int?

        /// Makes a configuration; each parameter sets the property of the same name, and defaults
        /// to that property's default.
        ///
        /// - Parameters:
        ///   - memoryCostLimit: The most bytes of decoded bitmaps kept in memory. Default: `nil`,
        ///     the `MemoryCache` default.
        ///   - maximumConcurrentDecodes: How many images are worked on at once. Default:
        ///     ``ImageWorkers/defaultThreadCount``.
        ///   - maximumQueuedDecodes: The most images waiting for a thread. Default: `nil`, no limit.
        ///   - decoder: The decoder. Default: `ImageDecoder()`.
        ///   - jpegQuality: The quality of JPEG variants. Default: 90.
        ///   - variantEncoding: How variants are stored. Default: `nil`, PNG or JPEG by the image.
        ///   - maximumSourceSize: The most bytes an original may have. Default: `nil`, no limit.
        public init(
            memoryCostLimit: Int? = nil,
            maximumConcurrentDecodes: Int = ImageWorkers.defaultThreadCount,
            maximumQueuedDecodes: Int? = nil,
            decoder: ImageDecoder = ImageDecoder(),
            jpegQuality: Int = 90,
            variantEncoding: ImageEncoding? = nil,
            maximumSourceSize: Int? = nil
        ) {
            self.memoryCostLimit = memoryCostLimit
            self.maximumConcurrentDecodes = maximumConcurrentDecodes
            self.maximumQueuedDecodes = maximumQueuedDecodes
            self.decoder = decoder
            self.jpegQuality = jpegQuality
            self.variantEncoding = variantEncoding
            self.maximumSourceSize = maximumSourceSize
        }
    }

    /// The configuration the pipeline was made with.
    public let configuration: Configuration
    /// The decoded bitmaps, originals under their URL in key form and variants under
    /// ``key(for:processors:)``, bounded by ``Configuration/memoryCostLimit``.
    public let memory: MemoryCache<String, Bitmap>
    /// The threads the pipeline's image work runs on: ``Configuration/maximumConcurrentDecodes``
    /// of them, with at most ``Configuration/maximumQueuedDecodes`` jobs waiting.
    public let workers: ImageWorkers
    let loader: ResourceLoader
    let variants: (any DataCaching)?
    private let flights: Flights<String, Bitmap>
    private let encodedFlights: Flights<String, EncodedImage>
    /// Runs, and variants being written.
    private let pending: PendingWork
    private let now: @Sendable () -> Date

    /// Makes a pipeline.
    ///
    /// - Parameters:
    ///   - loader: Loads the originals' bytes, with its own caches.
    ///   - variants: Where processed variants' bytes are kept, usually a `DiskCache` of its own;
    ///     `nil` to keep them in memory only.
    ///   - configuration: Limits, decoder and encodings. Default: `Configuration()`.
    ///   - now: The wall clock by which variants expire. Default: `WallClock.now`. Tests inject one.
    /// - Throws: `CacheError` with code `invalidConfiguration` if
    ///   ``Configuration/maximumConcurrentDecodes`` is less than 1,
    ///   ``Configuration/maximumQueuedDecodes`` is negative, or the memory cache refuses
    ///   ``Configuration/memoryCostLimit`` (not positive).
    public init(
        loader: ResourceLoader,
        variants: (any DataCaching)?,
        configuration: Configuration = Configuration(),
        now: @escaping @Sendable () -> Date = WallClock.now
    ) throws(CacheError) {
        guard configuration.maximumConcurrentDecodes > 0 else {
            throw CacheError(.invalidConfiguration, "maximumConcurrentDecodes must be at least 1.")
        }
        guard (configuration.maximumQueuedDecodes ?? 0) >= 0 else {
            throw CacheError(.invalidConfiguration, "maximumQueuedDecodes cannot be negative.")
        }
        self.configuration = configuration
        self.memory = try MemoryCache(configuration: .init(costLimit: configuration.memoryCostLimit))
        self.loader = loader
        self.variants = variants
        self.workers = try ImageWorkers(
            threads: configuration.maximumConcurrentDecodes,
            queueLimit: configuration.maximumQueuedDecodes
        )
        let pending = PendingWork()
        self.pending = pending
        self.flights = Flights(counting: pending)
        self.encodedFlights = Flights(counting: pending)
        self.now = now
    }

    /// The key of the variant `processors` make of `url`: the URL in key form, then `#` and the
    /// processors' identifiers joined by `|` (none for the original).
    ///
    /// The memory tier and `variants` hold variants under it; an encoded variant from
    /// ``encodedImage(for:processors:encoding:priority:)`` is stored under it followed by `@`
    /// and the encoding's ``ImageEncoding/description``.
    public static func key(for url: URL, processors: [any ImageProcessing]) -> String {
        let url = CacheKey.url(of: url) ?? url.absoluteString
        return processors.isEmpty ? url : url + "#" + processors.map(\.identifier).joined(separator: "|")
    }

    /// The image at `url`, processed by `processors` in order.
    ///
    /// From memory if it holds the result; else from the variant stored in `variants`, if any
    /// processors were given and the variant is still fresh; else the original is loaded through
    /// the loader, decoded at the smallest scale the first processor allows, processed, kept in
    /// memory, and (with processors, if the original may be stored and is fresh) encoded and
    /// written to `variants` once the callers have their answer.
    ///
    /// - Parameters:
    ///   - url: The original image.
    ///   - processors: What to do to it, in order. Default: none, the original decoded.
    ///   - priority: The loader's priority for the original. Default: `.normal`.
    /// - Throws: ``ImageError`` if the answer is not an image that can be decoded (including an
    ///   error status), `LoadError` if it could not be loaded, `CancellationError`, or what a
    ///   processor throws.
    public func image(
        for url: URL,
        processors: [any ImageProcessing] = [],
        priority: ResourceLoader.Priority = .normal
    ) async throws -> Bitmap {
        let key = Self.key(for: url, processors: processors)
        if let bitmap = self.memory.value(forKey: key) { return bitmap }
        return try await self.flights.run(key, priority: priority.rawValue, progress: nil) { run in
            try await self.make(key, url: url, processors: processors, priority: priority, run: run)
        }.value
    }

    /// Waits until the variants made so far, and the originals the loader loaded for them, are
    /// on disk, and requests whose callers all went have stopped. Call it before the process
    /// exits.
    public func waitForBackgroundWork() async {
        // The pipeline's own work may still load originals: it goes first.
        await self.pending.waitUntilIdle()
        await self.loader.waitForBackgroundWork()
    }

    /// The variant `processors` make of `url`, encoded as `encoding`: from `variants` if it is
    /// stored there and fresh, else made from the original and stored.
    ///
    /// Unlike ``image(for:processors:priority:)``, it keeps no bitmap in memory: what it hands out
    /// is bytes, to send or to write. The bytes are stored only while the original is fresh.
    ///
    /// - Parameters:
    ///   - url: The original image.
    ///   - processors: What to do to it, in order. Default: none.
    ///   - encoding: The format and quality of the bytes handed out.
    ///   - priority: The loader's priority for the original. Default: `.normal`.
    /// - Throws: as ``image(for:processors:priority:)``, and what ``ImageEncoder/encode(_:as:)``
    ///   throws.
    public func encodedImage(
        for url: URL,
        processors: [any ImageProcessing] = [],
        encoding: ImageEncoding,
        priority: ResourceLoader.Priority = .normal
    ) async throws -> EncodedImage {
        let key = Self.key(for: url, processors: processors) + "@" + encoding.description
        if let stored = self.storedVariant(key), let format = ImageFormat(sniffing: stored.data) {
            return EncodedImage(data: stored.data, format: format, expires: stored.expiry, source: .stored)
        }
        return try await self.encodedFlights.run(key, priority: priority.rawValue, progress: nil) { _ in
            try await self.makeEncoded(
                key,
                url: url,
                processors: processors,
                encoding: encoding,
                priority: priority
            )
        }.value
    }

    /// What one flight of ``encodedImage(for:processors:encoding:priority:)`` does: the original
    /// loaded, processed and encoded.
    private func makeEncoded(
        _ key: String,
        url: URL,
        processors: [any ImageProcessing],
        encoding: ImageEncoding,
        priority: ResourceLoader.Priority,
    ) async throws -> EncodedImage {
        let resource = try await self.original(url, priority: priority)
        let expiry = self.expiry(of: resource, url: url)
        let bitmap = try await self.decoded { try self.process(resource.body, processors) }
        // Callers that have all gone by now get no encoding.
        try Task.checkCancellation()
        let data = try await self.workers.run(first: true) { try ImageEncoder.encode(bitmap, as: encoding) }
        // Stored before answering (a write is small beside the decoding): a request that comes
        // after this answer finds the variant, and one that comes before joins this flight.
        if expiry > self.now() { try? self.variants?.set(data, forKey: key, metadata: Self.metadata(expiry: expiry)) }
        return EncodedImage(data: data, format: encoding.format, expires: expiry, source: .made)
    }

    /// What one flight of ``image(for:processors:priority:)`` does: the variant from disk, else
    /// the original loaded and processed.
    private func make(
        _ key: String,
        url: URL,
        processors: [any ImageProcessing],
        priority: ResourceLoader.Priority,
        run: Flights<String, Bitmap>.Run
    ) async throws -> Bitmap {
        if !processors.isEmpty, let stored = self.storedVariant(key) {
            let bitmap = try await self.decoded { try self.configuration.decoder.decode(stored.data) }
            try? self.memory.set(bitmap, forKey: key, cost: bitmap.cost)
            return bitmap
        }
        let resource = try await self.original(url, priority: priority)
        let bitmap = try await self.decoded { try self.process(resource.body, processors) }
        try? self.memory.set(bitmap, forKey: key, cost: bitmap.cost)
        let expiry = self.expiry(of: resource, url: url)
        if !processors.isEmpty, expiry > self.now() {
            let encoding =
                self.configuration.variantEncoding
                ?? (ImageFormat(sniffing: resource.body) == .png || bitmap.hasTransparency
                    ? .png : .jpeg(quality: self.configuration.jpegQuality))
            // Encoded and written once the callers have the bitmap.
            self.store(key, expiry: expiry, after: run) { try? ImageEncoder.encode(bitmap, as: encoding) }
        }
        return bitmap
    }

    /// The original at `url`, from the pipeline's loader, as the pipeline reads it before
    /// decoding: a success within ``Configuration/maximumSourceSize``.
    ///
    /// The head is checked before the body is read: an error status, or a `Content-Length` over
    /// the limit, is thrown without reading the body; a body without a length is read only
    /// until it passes the limit.
    ///
    /// - Parameters:
    ///   - url: The original image.
    ///   - priority: The loader's priority. Default: `.normal`.
    /// - Throws: ``ImageError`` with code ``ImageError/Code/status(_:)`` for a status other than
    ///   2xx, ``ImageError/Code/tooLarge`` past the limit; what the loader throws.
    public func original(_ url: URL, priority: ResourceLoader.Priority = .normal) async throws -> Resource {
        let stream = try await self.loader.stream(HTTPRequest(method: .get, url: url), priority: priority)
        let status = stream.response.status.code
        guard (200..<300).contains(status) else {
            throw ImageError(.status(status), "the server answered \(status) for \(url.absoluteString)")
        }
        let limit = self.configuration.maximumSourceSize ?? .max
        if let length = stream.length, length > limit {
            throw ImageError(.tooLarge, "\(url.absoluteString) has \(length) bytes, more than the \(limit) allowed")
        }
        var body = Data()
        if let length = stream.length { body.reserveCapacity(length) }
        for try await piece in stream.body {
            body.append(piece)
            guard body.count <= limit else {
                throw ImageError(.tooLarge, "\(url.absoluteString) has more than the \(limit) bytes allowed")
            }
        }
        var resource = Resource(body: body, response: stream.response, source: stream.source)
        resource.redirects = stream.redirects
        resource.forwardReason = stream.forwardReason
        return resource
    }

    /// Writes the bytes `encode` makes to `variants` under `key`, once `run`'s callers have
    /// their answer.
    private func store(
        _ key: String,
        expiry: Date,
        after run: Flights<String, Bitmap>.Run,
        _ encode: @escaping @Sendable () -> Data?
    ) {
        guard let variants = self.variants else { return }
        self.pending.begin()
        run.afterAnswering.add { [pending, workers] in
            workers.start {
                defer { pending.end() }
                guard let bytes = encode() else { return }
                try? variants.set(bytes, forKey: key, metadata: Self.metadata(expiry: expiry))
            }
        }
    }

    /// Decodes `body`, at the smallest size the first processor allows, and processes it.
    private func process(_ body: Data, _ processors: [any ImageProcessing]) throws -> Bitmap {
        let decoder = self.configuration.decoder
        var scale = 1.0
        if let first = processors.first {
            let size = try decoder.size(of: body)
            scale = first.requiredScale(sourceWidth: size.width, sourceHeight: size.height)
        }
        var bitmap = try decoder.decode(body, scale: scale)
        for processor in processors {
            try Task.checkCancellation()
            bitmap = try processor.process(bitmap)
        }
        return bitmap
    }

    /// Runs image work on ``workers`` when a thread is free, unless the flight is cancelled
    /// meanwhile.
    func decoded<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await self.workers.run(work)
    }

    // MARK: - Variants on disk

    /// The bytes of the stored variant for `key` and when it expires, if it has not.
    private func storedVariant(_ key: String) -> (data: Data, expiry: Date)? {
        guard let entry = try? self.variants?.entry(forKey: key),
            let expiry = Self.expiry(in: entry.metadata), self.now() < expiry
        else { return nil }
        return (entry.data, expiry)
    }

    /// When a variant made now from `resource` expires: when the original stops being fresh.
    /// By the loader's rules: a variant of an original that a shared cache may not store (such
    /// as one marked `private`) expires at once, and is not kept.
    private func expiry(of resource: Resource, url: URL) -> Date {
        let now = self.now()
        let request = HTTPRequest(method: .get, url: url)
        let rules = self.loader.configuration.rules
        guard rules.canStore(resource.response, for: request) else { return now }
        let stored = StoredResponse(request: request, response: resource.response, requestTime: now, responseTime: now)
        let remaining = stored.freshnessLifetime(isShared: rules.isShared) - stored.age(at: now)
        return now.addingTimeInterval(max(0, remaining))
    }

    /// A variant's metadata: "CIV1" and its expiry in whole seconds since 1970, as text.
    private static func metadata(expiry: Date) -> Data {
        Data("CIV1 \(Int64(expiry.timeIntervalSince1970))".utf8)
    }

    private static func expiry(in metadata: Data) -> Date? {
        let text = String(decoding: metadata, as: UTF8.self)
        guard text.hasPrefix("CIV1 "), let seconds = Int64(text.dropFirst(5)) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}
