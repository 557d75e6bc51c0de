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
/// - Memory holds bitmaps by their real cost, `bytesPerRow × height`, while their original is
///   fresh: the original under its URL, a variant under its ``key(for:processors:)``.
/// - The original's bytes are kept by the loader, by HTTP's rules (a `no-store` image is not).
/// - A variant's bytes are kept in `variants`, in ``Configuration/variantEncoding``; by default
///   as PNG if the source was PNG or the variant has transparency, else as JPEG at
///   ``Configuration/jpegQuality``. A variant is fresh as long as its original was when it was
///   made; after that, the original is loaded again through the loader (which revalidates it),
///   and the variant stands if the original's bytes are the same (by their SHA-256, kept with
///   the variant), else it is made again.
/// - ``encodedImage(for:processors:encoding:priority:)`` hands out a variant's bytes in a
///   format asked for (a server's or a command's output), kept in `variants` under a key of
///   their own, and in memory up to ``Configuration/variantMemoryCostLimit``.
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
        /// The most bytes of encoded variants kept in memory by
        /// ``ImagePipeline/encodedImage(for:processors:encoding:priority:)``, so that a variant
        /// asked for again is not read from `variants`; positive. Default: 32 MiB.
        public var variantMemoryCostLimit: Int
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
        ///   - variantMemoryCostLimit: The most bytes of encoded variants kept in memory.
        ///     Default: 32 MiB.
        ///   - maximumConcurrentDecodes: How many images are worked on at once. Default:
        ///     ``ImageWorkers/defaultThreadCount``.
        ///   - maximumQueuedDecodes: The most images waiting for a thread. Default: `nil`, no limit.
        ///   - decoder: The decoder. Default: `ImageDecoder()`.
        ///   - jpegQuality: The quality of JPEG variants. Default: 90.
        ///   - variantEncoding: How variants are stored. Default: `nil`, PNG or JPEG by the image.
        ///   - maximumSourceSize: The most bytes an original may have. Default: `nil`, no limit.
        public init(
            memoryCostLimit: Int? = nil,
            variantMemoryCostLimit: Int = 32 << 20,
            maximumConcurrentDecodes: Int = ImageWorkers.defaultThreadCount,
            maximumQueuedDecodes: Int? = nil,
            decoder: ImageDecoder = ImageDecoder(),
            jpegQuality: Int = 90,
            variantEncoding: ImageEncoding? = nil,
            maximumSourceSize: Int? = nil
        ) {
            self.memoryCostLimit = memoryCostLimit
            self.variantMemoryCostLimit = variantMemoryCostLimit
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
    /// Encoded variants, as in `variants` and under the same keys.
    let variantMemory: MemoryCache<String, StoredVariant>
    /// How many times variants were removed (see ``removing(_:)``): a variant read or made
    /// before a removal is not kept after it.
    private let removals = Mutex(0)
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
    ///   ``Configuration/maximumQueuedDecodes`` is negative, or a memory cache refuses
    ///   ``Configuration/memoryCostLimit`` or ``Configuration/variantMemoryCostLimit`` (not
    ///   positive).
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
        // Bitmaps expire with their originals, by the pipeline's clock.
        self.memory = try MemoryCache(
            configuration: .init(costLimit: configuration.memoryCostLimit),
            clock: DateClock(now)
        )
        self.variantMemory = try MemoryCache(configuration: .init(costLimit: configuration.variantMemoryCostLimit))
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
    /// and the encoding's ``ImageEncoding/description`` (or the choice's
    /// ``ImageEncodingChoice/name``).
    public static func key(for url: URL, processors: [any ImageProcessing]) -> String {
        let url = CacheKey.url(of: url) ?? url.absoluteString
        return processors.isEmpty ? url : url + "#" + processors.map(\.identifier).joined(separator: "|")
    }

    /// The image at `url`, processed by `processors` in order.
    ///
    /// From memory if it holds the result; else from the variant stored in `variants`, if any
    /// processors were given and the variant is still fresh (or its original, revalidated, has
    /// not changed); else the original is loaded through the loader, decoded at the smallest
    /// scale the first processor allows, processed, kept in memory, and (with processors, if the
    /// original may be stored) encoded and written to `variants` once the callers have their
    /// answer. Memory keeps a bitmap only while its original is fresh.
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
    /// is bytes, to send or to write. The bytes are stored if the original may be, with the
    /// digest of the original's bytes. Once they expire, the original is loaded again (the
    /// loader revalidates it); if its bytes are the same, the stored bytes stand, for as long as
    /// the original is now fresh (``EncodedImage/Source/revalidated``), and nothing is decoded or
    /// encoded.
    ///
    /// - Parameters:
    ///   - url: The original image.
    ///   - processors: What to do to it, in order. Default: none.
    ///   - encoding: The format and quality of the bytes handed out.
    ///   - priority: The loader's priority for the original. Default: `.normal`.
    /// - Throws: as ``image(for:processors:priority:)``, and what ``ImageEncoder/encode(_:as:)-(Bitmap,_)``
    ///   throws.
    public func encodedImage(
        for url: URL,
        processors: [any ImageProcessing] = [],
        encoding: ImageEncoding,
        priority: ResourceLoader.Priority = .normal
    ) async throws -> EncodedImage {
        try await self.encodedImage(for: url, processors: processors, choosing: .always(encoding), priority: priority)
    }

    /// The variant `processors` make of `url`, encoded as `choice` chooses for the original's
    /// format, as ``encodedImage(for:processors:encoding:priority:)`` makes and keeps it: stored
    /// under the choice's name, it is found again without loading the original.
    ///
    /// - Parameters:
    ///   - url: The original image.
    ///   - processors: What to do to it, in order. Default: none.
    ///   - choice: The encoding for the original's format, once it is loaded.
    ///   - priority: The loader's priority for the original. Default: `.normal`.
    /// - Throws: as ``encodedImage(for:processors:encoding:priority:)``.
    public func encodedImage(
        for url: URL,
        processors: [any ImageProcessing] = [],
        choosing choice: ImageEncodingChoice,
        priority: ResourceLoader.Priority = .normal
    ) async throws -> EncodedImage {
        let key = Self.key(for: url, processors: processors) + "@" + choice.name
        let epoch = self.removals.withLock { $0 }
        let stored = self.variantMemory.value(forKey: key) ?? self.storedVariantKeptInMemory(key, epoch: epoch)
        if let stored, self.now() < stored.life.expiry, let format = ImageFormat(sniffing: stored.data) {
            return EncodedImage(
                data: stored.data,
                format: format,
                expires: stored.life.expiry,
                source: .stored,
                entityTag: stored.life.entityTag(forKey: key)
            )
        }
        return try await self.encodedFlights.run(key, priority: priority.rawValue, progress: nil) { _ in
            try await self.makeEncoded(
                key,
                url: url,
                processors: processors,
                choice: choice,
                priority: priority,
                expired: stored,
                epoch: epoch
            )
        }.value
    }

    /// What one flight of ``encodedImage(for:processors:encoding:priority:)`` does: the original
    /// loaded; the `expired` variant kept if the original has not changed, else the original
    /// processed and encoded.
    private func makeEncoded(
        _ key: String,
        url: URL,
        processors: [any ImageProcessing],
        choice: ImageEncodingChoice,
        priority: ResourceLoader.Priority,
        expired: StoredVariant?,
        epoch: Int
    ) async throws -> EncodedImage {
        let resource = try await self.original(url, priority: priority)
        let expiry = self.expiry(of: resource, url: url)
        if let expired, let life = try await self.standingLife(of: expired, original: resource, expiry: expiry),
            let format = ImageFormat(sniffing: expired.data)
        {
            self.keep((expired.data, life), forKey: key, replacing: expired.life, since: epoch)
            return EncodedImage(
                data: expired.data,
                format: format,
                expires: life.expiry,
                source: .revalidated,
                original: resource.source,
                entityTag: life.entityTag(forKey: key)
            )
        }
        let made = try await self.processed(resource.body, processors, digesting: expiry != nil, choosing: choice)
        let (image, encoding) = (made.image, made.encoding ?? .png)
        let life = expiry.map { VariantLife(expiry: $0, original: made.digest) }
        // Callers that have all gone by now get no encoding: a cancelled task's job never runs.
        let data = try await self.workers.run(first: true) { _ in try ImageEncoder.encode(image, as: encoding) }
        // Stored before answering (a write is small beside the decoding): a request that comes
        // after this answer finds the variant, and one that comes before joins this flight.
        let kept = life.map { $0.isKept(at: self.now()) } ?? false
        if let life, kept {
            self.keep((data, life), forKey: key, replacing: nil, since: epoch)
        } else if expired != nil {
            self.removing(key)
        }
        return EncodedImage(
            data: data,
            format: encoding.format,
            expires: life?.expiry ?? self.now(),
            source: .made,
            original: resource.source,
            entityTag: kept ? life?.entityTag(forKey: key) : nil
        )
    }

    /// What one flight of ``image(for:processors:priority:)`` does: the variant from disk if it
    /// is fresh, or if it has expired and the original, loaded again, has not changed; else the
    /// original loaded and processed.
    private func make(
        _ key: String,
        url: URL,
        processors: [any ImageProcessing],
        priority: ResourceLoader.Priority,
        run: Flights<String, Bitmap>.Run
    ) async throws -> Bitmap {
        let epoch = self.removals.withLock { $0 }
        let stored = processors.isEmpty ? nil : self.storedVariant(key)
        if let stored, self.now() < stored.life.expiry,
            let bitmap = try await self.decodedVariant(stored.data, key: key, life: stored.life, since: epoch)
        {
            return bitmap
        }
        let resource = try await self.original(url, priority: priority)
        let expiry = self.expiry(of: resource, url: url)
        if let stored, let life = try await self.standingLife(of: stored, original: resource, expiry: expiry),
            let bitmap = try await self.decodedVariant(stored.data, key: key, life: life, since: epoch)
        {
            self.keep(nil, forKey: key, replacing: stored.life, life: life, since: epoch)
            return bitmap
        }
        let made = try await self.processed(resource.body, processors, digesting: expiry != nil)
        let bitmap = made.image.frames[0].bitmap
        let life = expiry.map { VariantLife(expiry: $0, original: made.digest) }
        self.keep(bitmap, forKey: key, life: life, since: epoch)
        if stored != nil, life == nil { self.removing(key) }
        if !processors.isEmpty, let life, life.isKept(at: self.now()) {
            let isPNG = ImageFormat(sniffing: resource.body) == .png
            let (variantEncoding, quality) = (self.configuration.variantEncoding, self.configuration.jpegQuality)
            // Encoded and written once the callers have the bitmap, on an image thread: looking
            // for transparency reads every pixel.
            self.store(key, life: life, since: epoch, after: run) {
                let encoding =
                    variantEncoding ?? (isPNG || bitmap.hasTransparency ? .png : .jpeg(quality: quality))
                return try? ImageEncoder.encode(bitmap, as: encoding)
            }
        }
        return bitmap
    }

    /// A stored variant's bytes decoded, and kept in memory while `life` says it is fresh; `nil`
    /// if they no longer decode (a lower pixel limit, say), and the variant is removed, to be made
    /// again.
    private func decodedVariant(_ data: Data, key: String, life: VariantLife, since epoch: Int) async throws -> Bitmap?
    {
        let decoder = self.configuration.decoder
        do {
            let bitmap = try await self.decoded { try decoder.decode(data) }
            self.keep(bitmap, forKey: key, life: life, since: epoch)
            return bitmap
        } catch is ImageError {
            self.removing(key)
            return nil
        }
    }

    /// Keeps `bitmap` in memory for as long as its original is fresh, by `life` (not at all
    /// without freshness, or for an original that may not be stored), and with `replacing`,
    /// the stored variant's new life in `variants`: unless variants were removed since `epoch`.
    private func keep(
        _ bitmap: Bitmap?,
        forKey key: String,
        replacing old: VariantLife? = nil,
        life: VariantLife?,
        since epoch: Int
    ) {
        // At most what a max-age can say, so that the memory tier's clock cannot overflow.
        let remaining = min(life.map { $0.expiry.timeIntervalSince(self.now()) } ?? 0, TimeInterval(Int32.max))
        self.ifNotRemoved(since: epoch) {
            if let old, let life, life.expiry > old.expiry, let variants = self.variants,
                let entry = try? variants.entry(forKey: key)
            {
                try? variants.set(entry.data, forKey: key, metadata: life.metadata)
            }
            guard let bitmap else { return }
            guard remaining > 0 else {
                self.memory.removeValue(forKey: key)
                return
            }
            try? self.memory.set(bitmap, forKey: key, cost: bitmap.cost, timeToLive: .seconds(remaining))
        }
    }

    /// Writes an encoded variant to `variants` and keeps it in memory, where
    /// ``encodedImage(for:processors:encoding:priority:)`` looks first: unless variants were
    /// removed since `epoch`. An expired variant that stands (`replacing` its old life) is
    /// written again only if its new life is longer.
    private func keep(_ variant: StoredVariant, forKey key: String, replacing old: VariantLife?, since epoch: Int) {
        self.ifNotRemoved(since: epoch) {
            if old.map({ variant.life.expiry > $0.expiry }) ?? true {
                try? self.variants?.set(variant.data, forKey: key, metadata: variant.life.metadata)
            }
            try? self.variantMemory.set(variant, forKey: key, cost: variant.data.count)
        }
    }

    /// Runs `keep` unless variants were removed since `epoch`, with removals held off until it
    /// is done: a variant read or made before a purge never lands after it.
    private func ifNotRemoved(since epoch: Int, _ keep: () -> Void) {
        self.removals.withLock { removals in
            guard removals == epoch else { return }
            keep()
        }
    }

    /// Removes what is kept for `key`: the variant no longer stands.
    private func removing(_ key: String) {
        let forget = {
            self.memory.removeValue(forKey: key)
            self.variantMemory.removeValue(forKey: key)
        }
        try? self.removing(forgetting: forget) { () throws(CacheError) in
            _ = try self.variants?.removeValue(forKey: key)
        }
    }

    /// Removes variants from `variants` with `remove`, and from memory with `forget`, so that
    /// none read or made before is kept after: the count of removals moves on before and after
    /// (a variant read or made before either is not kept), and `forget` runs at both moments,
    /// while no variant is being kept.
    func removing<Result>(
        forgetting forget: () -> Void,
        _ remove: () throws(CacheError) -> Result
    ) throws(CacheError) -> Result {
        self.removals.withLock { removals in
            removals += 1
            forget()
        }
        defer {
            self.removals.withLock { removals in
                removals += 1
                forget()
            }
        }
        return try remove()
    }

    /// Whether `response` says `no-cache` (unqualified): a stored copy is revalidated before
    /// each use.
    private static func requiresRevalidation(_ response: HTTPResponse) -> Bool {
        let directives = CacheControl(response.headerFields[values: .cacheControl])
        return directives.isNoCache && directives.noCacheFields.isEmpty
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
        // A body from a file comes mapped, in one piece: kept as it is, not copied. Nothing is
        // reserved from the declared length, which the origin chose.
        var body = Data()
        for try await piece in stream.body {
            if body.isEmpty { body = piece } else { body.append(piece) }
            guard body.count <= limit else {
                throw ImageError(.tooLarge, "\(url.absoluteString) has more than the \(limit) bytes allowed")
            }
        }
        var resource = Resource(body: body, response: stream.response, source: stream.source)
        resource.redirects = stream.redirects
        resource.forwardReason = stream.forwardReason
        resource.timeToLive = stream.timeToLive
        return resource
    }

    /// Writes the bytes `encode` makes to `variants` under `key`, once `run`'s callers have
    /// their answer.
    private func store(
        _ key: String,
        life: VariantLife,
        since epoch: Int,
        after run: Flights<String, Bitmap>.Run,
        _ encode: @escaping @Sendable () -> Data?
    ) {
        guard let variants = self.variants else { return }
        self.pending.begin()
        run.afterAnswering.add { [pending, workers] in
            workers.start {
                defer { pending.end() }
                guard let bytes = encode() else { return }
                self.ifNotRemoved(since: epoch) { try? variants.set(bytes, forKey: key, metadata: life.metadata) }
            }
        }
    }

    /// What ``processed(_:_:digesting:choosing:)`` makes of an original.
    private struct Processed: Sendable {
        /// One frame, or every frame of an animated original for an encoding that animates.
        var image: Animation
        /// The encoding chosen for the original, if a choice was given.
        var encoding: ImageEncoding?
        /// The original's digest, if asked for.
        var digest: String?
    }

    /// Decodes `body` on an image thread, at the smallest size the first processor allows, and
    /// processes it; stops between steps once every caller has gone. With `digesting`, the
    /// same job takes the digest of `body`, which the variant's life keeps. With `choice`, it
    /// chooses the encoding for the original, read from its bytes; an animated original whose
    /// encoding animates is decoded whole, frame by frame, each frame processed, under the
    /// decoder's pixel limit over all its frames (past it, its first frame is made, as a still).
    private func processed(
        _ body: Data,
        _ processors: [any ImageProcessing],
        digesting: Bool,
        choosing choice: ImageEncodingChoice? = nil
    ) async throws -> Processed {
        let decoder = self.configuration.decoder
        return try await self.workers.run(first: false) { cancellation in
            let digest = digesting ? VariantLife.digest(of: body) : nil
            var encoding: ImageEncoding?
            if let choice {
                let animated = decoder.isAnimated(body)
                let chosen = choice.encoding(for: .init(format: ImageFormat(sniffing: body), isAnimated: animated))
                encoding = chosen
                if animated, chosen.animates, chosen.format == .webp {
                    do {
                        let image = try Self.processedFrames(body, processors, decoder: decoder, cancellation)
                        return Processed(image: image, encoding: chosen, digest: digest)
                    } catch let error as ImageError where error.code == .tooLarge {
                        // More pixels in all its frames than the limit: its first frame, as a still.
                    }
                }
            }
            var scale = 1.0
            if let first = processors.first {
                let size = try decoder.size(of: body)
                scale = first.requiredScale(sourceWidth: size.width, sourceHeight: size.height)
            }
            let bitmap = try Self.process(decoder.decode(body, scale: scale), processors, cancellation)
            let image = Animation(frames: [.init(bitmap: bitmap, duration: .zero)], loopCount: 0)
            return Processed(image: image, encoding: encoding, digest: digest)
        }
    }

    /// Every frame of `body` processed, each full-size frame let go once it is.
    private static func processedFrames(
        _ body: Data,
        _ processors: [any ImageProcessing],
        decoder: ImageDecoder,
        _ cancellation: ImageWorkers.Cancellation
    ) throws -> Animation {
        var pending: [Animation.Frame]
        let loopCount: Int
        do {
            let animation = try decoder.decodeAnimation(body)
            (pending, loopCount) = (animation.frames.reversed(), animation.loopCount)
        }
        var frames: [Animation.Frame] = []
        frames.reserveCapacity(pending.count)
        while let frame = pending.popLast() {
            let bitmap = try Self.process(frame.bitmap, processors, cancellation)
            frames.append(.init(bitmap: bitmap, duration: frame.duration))
        }
        return Animation(frames: frames, loopCount: loopCount)
    }

    /// `bitmap` through `processors`, in order, stopping before each once every caller has gone.
    private static func process(
        _ bitmap: Bitmap,
        _ processors: [any ImageProcessing],
        _ cancellation: ImageWorkers.Cancellation
    ) throws -> Bitmap {
        var bitmap = bitmap
        for processor in processors {
            try cancellation.check()
            bitmap = try processor.process(bitmap)
        }
        return bitmap
    }

    /// The life of a stored `variant` whose original, loaded again, is `original`, with
    /// `expiry` if it may be stored: `nil` if the variant does not stand for it (other bytes,
    /// or no longer to be stored). Hashing the original is image work, on an image thread.
    private func standingLife(
        of variant: StoredVariant,
        original: Resource,
        expiry: Date?
    ) async throws -> VariantLife? {
        guard let expiry, let made = variant.life.original else { return nil }
        let body = original.body
        let digest = try await self.workers.run { VariantLife.digest(of: body) }
        return digest == made ? VariantLife(expiry: expiry, original: digest) : nil
    }

    /// Runs image work on ``workers`` when a thread is free, unless the flight is cancelled
    /// meanwhile.
    func decoded<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await self.workers.run(work)
    }

    // MARK: - Variants on disk

    /// A variant in `variants`: its bytes, and how long it stands.
    typealias StoredVariant = (data: Data, life: VariantLife)

    /// The stored variant for `key`, fresh or not, kept in memory from now on if it is worth
    /// keeping (see ``VariantLife/isKept(at:)``) and no variant was removed since `epoch`.
    private func storedVariantKeptInMemory(_ key: String, epoch: Int) -> StoredVariant? {
        guard let stored = self.storedVariant(key) else { return nil }
        if stored.life.isKept(at: self.now()) {
            self.ifNotRemoved(since: epoch) {
                try? self.variantMemory.set(stored, forKey: key, cost: stored.data.count)
            }
        }
        return stored
    }

    /// The stored variant for `key`, fresh or not.
    private func storedVariant(_ key: String) -> StoredVariant? {
        guard let entry = try? self.variants?.entry(forKey: key), let life = VariantLife(metadata: entry.metadata)
        else { return nil }
        return (entry.data, life)
    }

    /// When a variant made now from `resource` expires: when the original stops being fresh
    /// (at once for `no-cache`). `nil` for an original the loader's rules keep from being
    /// stored (`no-store`, or `private` for a shared cache's loader): a variant of it is not
    /// kept.
    private func expiry(of resource: Resource, url: URL) -> Date? {
        let now = self.now()
        let request = HTTPRequest(method: .get, url: url)
        let rules = self.loader.configuration.rules
        guard rules.canStore(resource.response, for: request) else { return nil }
        let stored = StoredResponse(request: request, response: resource.response, requestTime: now, responseTime: now)
        // `no-cache`: the loader revalidates the original before each use; so is the variant.
        let remaining =
            Self.requiresRevalidation(resource.response)
            ? 0 : stored.freshnessLifetime(isShared: rules.isShared) - stored.age(at: now)
        return now.addingTimeInterval(max(0, remaining))
    }
}
