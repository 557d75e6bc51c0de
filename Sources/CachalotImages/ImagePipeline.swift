import Cachalot
import Foundation
import HTTPTypes
import Synchronization

/// Loads images as decoded, processed bitmaps: from memory, else the processed variant's bytes
/// from disk, else the original's bytes through a ``ResourceLoader`` (memory, disk, network),
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
/// - A variant's bytes are kept in `variants`, encoded as PNG if the source was PNG or the
///   variant has transparency, else as JPEG at ``Configuration/jpegQuality``. A variant lasts
///   as long as its original was fresh when it was made; after that, the original is loaded
///   again through the loader (which revalidates it) and the variant is made again.
///
/// Identical requests in flight share one load, decode and processing; each caller may cancel
/// on its own, and the work stops when the last caller goes. Decoding and processing run on the
/// concurrency pool, at most ``Configuration/maximumConcurrentDecodes`` at once.
public final class ImagePipeline: Sendable {
    public struct Configuration: Sendable {
        /// The most memory the decoded bitmaps may hold, in bytes. Default: `nil`, the
        /// ``MemoryCache`` default (a share of the machine's memory). As in any `MemoryCache`, one
        /// bitmap may take at most a tenth of it; a larger one is answered but not kept.
        public var memoryCostLimit: Int?
        /// How many images may be decoded and processed at once. Default: the active processors.
        public var maximumConcurrentDecodes: Int
        /// The decoder, with its limit on declared pixels.
        public var decoder: ImageDecoder
        /// The quality of JPEG variants (1 to 100). Default: 90.
        public var jpegQuality: Int

        public init(
            memoryCostLimit: Int? = nil,
            maximumConcurrentDecodes: Int = ProcessInfo.processInfo.activeProcessorCount,
            decoder: ImageDecoder = ImageDecoder(),
            jpegQuality: Int = 90
        ) {
            self.memoryCostLimit = memoryCostLimit
            self.maximumConcurrentDecodes = maximumConcurrentDecodes
            self.decoder = decoder
            self.jpegQuality = jpegQuality
        }
    }

    public let configuration: Configuration
    /// The decoded bitmaps.
    public let memory: MemoryCache<String, Bitmap>
    private let loader: ResourceLoader
    private let variants: (any DataCaching)?
    private let flights: Coalescer<Bitmap>
    private let decoding: HostLimiter
    private let tickets = Atomic<Int>(0)
    /// Runs, and variants being written.
    private let pending: PendingWork
    private let now: @Sendable () -> Date

    /// Makes a pipeline.
    ///
    /// - Parameters:
    ///   - loader: Loads the originals' bytes, with its own caches.
    ///   - variants: Where processed variants' bytes are kept, usually a ``DiskCache`` of its own;
    ///     `nil` to keep them in memory only.
    ///   - now: The wall clock by which variants expire. Default: `WallClock.now`. Tests inject one.
    public init(
        loader: ResourceLoader,
        variants: (any DataCaching)?,
        configuration: Configuration = Configuration(),
        now: @escaping @Sendable () -> Date = WallClock.now
    ) throws(CacheError) {
        guard configuration.maximumConcurrentDecodes > 0 else {
            throw CacheError(.invalidConfiguration, "maximumConcurrentDecodes must be at least 1.")
        }
        self.configuration = configuration
        self.memory = try MemoryCache(configuration: .init(costLimit: configuration.memoryCostLimit))
        self.loader = loader
        self.variants = variants
        self.decoding = HostLimiter(limit: configuration.maximumConcurrentDecodes)
        let pending = PendingWork()
        self.pending = pending
        self.flights = Coalescer(counting: pending)
        self.now = now
    }

    /// The key of the variant `processors` make of `url`: the URL in key form, then `#` and the
    /// processors' identifiers joined by `|` (none for the original).
    public static func key(for url: URL, processors: [any ImageProcessing]) -> String {
        let url = CacheKey.url(of: url) ?? url.absoluteString
        return processors.isEmpty ? url : url + "#" + processors.map(\.identifier).joined(separator: "|")
    }

    /// The image at `url`, processed by `processors` in order.
    ///
    /// - Throws: ``ImageError`` if the answer is not an image that can be decoded (including an
    ///   error status), ``LoadError`` if it could not be loaded, `CancellationError`, or what a
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
        }
    }

    /// Waits until the variants made so far, and the originals the loader loaded for them, are
    /// on disk, and requests whose callers all went have stopped. Call it before the process
    /// exits.
    public func waitForBackgroundWork() async {
        // The pipeline's own work may still load originals: it goes first.
        await self.pending.waitUntilIdle()
        await self.loader.waitForBackgroundWork()
    }

    /// What one flight does: the variant from disk, else the original loaded and processed.
    private func make(
        _ key: String,
        url: URL,
        processors: [any ImageProcessing],
        priority: ResourceLoader.Priority,
        run: Coalescer<Bitmap>.Run
    ) async throws -> Bitmap {
        if !processors.isEmpty, let bytes = self.storedVariant(key) {
            let bitmap = try await self.decoded { try self.configuration.decoder.decode(bytes) }
            try? self.memory.set(bitmap, forKey: key, cost: bitmap.cost)
            return bitmap
        }
        let resource = try await self.loader.load(url, priority: priority)
        let status = resource.response.status.code
        guard (200..<300).contains(status) else {
            throw ImageError(.status(status), "the server answered \(status) for \(url.absoluteString)")
        }
        let bitmap = try await self.decoded { try self.process(resource.body, processors) }
        try? self.memory.set(bitmap, forKey: key, cost: bitmap.cost)
        if !processors.isEmpty, let variants = self.variants {
            // Encoded and written once the callers have the bitmap.
            let expiry = self.expiry(of: resource, url: url)
            let isPNG = ImageFormat(sniffing: resource.body) == .png
            let quality = self.configuration.jpegQuality
            self.pending.begin()
            run.afterAnswering.add { [pending] in
                defer { pending.end() }
                guard let bytes = try? Self.encoded(bitmap, asPNG: isPNG, quality: quality) else { return }
                try? variants.set(bytes, forKey: key, metadata: Self.metadata(expiry: expiry))
            }
        }
        return bitmap
    }

    /// A variant's bytes: PNG if its source was PNG or it has transparency, else JPEG.
    private static func encoded(_ bitmap: Bitmap, asPNG isPNG: Bool, quality: Int) throws(ImageError) -> Data {
        isPNG || bitmap.hasTransparency ? try ImageEncoder.png(bitmap) : try ImageEncoder.jpeg(bitmap, quality: quality)
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

    /// Runs CPU work when a decoding slot is free, unless the flight was cancelled meanwhile.
    private func decoded(_ work: () throws -> Bitmap) async throws -> Bitmap {
        let ticket = self.tickets.wrappingAdd(1, ordering: .relaxed).newValue
        try await self.decoding.acquire("decoding", ticket: ticket, priority: 0)
        defer { self.decoding.release("decoding") }
        try Task.checkCancellation()
        return try work()
    }

    // MARK: - Variants on disk

    /// The bytes of the stored variant for `key`, if it has not expired.
    private func storedVariant(_ key: String) -> Data? {
        guard let entry = try? self.variants?.entry(forKey: key),
            let expiry = Self.expiry(in: entry.metadata), self.now() < expiry
        else { return nil }
        return entry.data
    }

    /// When a variant made now from `resource` expires: when the original stops being fresh.
    private func expiry(of resource: Resource, url: URL) -> Date {
        let now = self.now()
        let stored = StoredResponse(
            request: HTTPRequest(method: .get, url: url),
            response: resource.response,
            requestTime: now,
            responseTime: now
        )
        let remaining = stored.freshnessLifetime(isShared: false) - stored.age(at: now)
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
