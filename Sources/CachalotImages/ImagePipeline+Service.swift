import Cachalot
import Foundation

/// What an app's image service asks of the pipeline besides ``ImagePipeline/image(for:processors:priority:)``:
/// an answer from memory for a cell that must not wait, prefetching, and the disk's upkeep.
extension ImagePipeline {
    /// The image at `url` processed by `processors`, if memory holds it; never waits, never
    /// reads the disk. For a list cell that must draw now, and ask
    /// ``image(for:processors:priority:)`` when this is `nil`.
    ///
    /// - Parameters:
    ///   - url: The original image.
    ///   - processors: The processors of the variant wanted. Default: none, the original.
    /// - Returns: The bitmap, or `nil` if memory does not hold it (never loaded, evicted, or
    ///   cleared).
    public func cachedImage(for url: URL, processors: [any ImageProcessing] = []) -> Bitmap? {
        self.memory.value(forKey: Self.key(for: url, processors: processors))
    }

    /// Every frame of the animated GIF or WebP at `url`, with their durations, its original loaded
    /// through the loader (a still image is one frame). The frames are not kept in memory: keep
    /// the animation while it plays; its ``Animation/cost`` counts every frame.
    ///
    /// - Parameters:
    ///   - url: The animated image.
    ///   - priority: The loader's priority for the original. Default: `.normal`.
    /// - Throws: as ``image(for:processors:priority:)``; ``ImageError`` with code `tooLarge` if
    ///   the frames together pass the decoder's pixel limit.
    public func animation(for url: URL, priority: ResourceLoader.Priority = .normal) async throws -> Animation {
        let resource = try await self.original(url, priority: priority)
        return try await self.decoded { try self.configuration.decoder.decodeAnimation(resource.body) }
    }

    /// Loads `urls` ahead of need at `priority`: their bytes into the loader's caches and, if
    /// `decoding`, their images, processed by `processors`, into memory and their variants to
    /// disk, so that a later ``image(for:processors:priority:)`` with the same processors is a
    /// memory hit. Each URL is loaded once, in a task of its own; failures are not reported, and
    /// count as not loaded in ``ImagePrefetch/wait()``.
    ///
    /// - Parameters:
    ///   - urls: The images to load; a URL listed twice is loaded once.
    ///   - processors: The processors of the variants to make. Default: none, the originals.
    ///   - decoding: Whether to decode and process, or only load the bytes. Default: `true`.
    ///   - priority: The loader's priority. Default: `.low`.
    ///
    /// ```swift
    /// let prefetch = pipeline.prefetch(upcoming, processors: [Thumbnail(maximumPixelSize: 256)])
    /// prefetch.cancel()  // the list went away
    /// ```
    ///
    /// - Returns: A handle to cancel the prefetch or wait for it. Keep it: releasing it cancels
    ///   what has not finished.
    public func prefetch(
        _ urls: [URL],
        processors: [any ImageProcessing] = [],
        decoding: Bool = true,
        priority: ResourceLoader.Priority = .low
    ) -> ImagePrefetch {
        ImagePrefetch(urls: urls) { url in
            if decoding {
                _ = try await self.image(for: url, processors: processors, priority: priority)
            } else {
                _ = try await self.loader.load(url, priority: priority)
            }
        }
    }

    /// Removes from disk the originals received before `date` and the variants made before it.
    /// Memory, bounded on its own, keeps its bitmaps; ``clearAll()`` empties it too.
    ///
    /// - Returns: How many entries were removed, originals and variants.
    /// - Throws: `CacheError` if a disk could not be read or changed, or `variants` is not an
    ///   `EnumerableDataCaching` (such as `DiskCache`), which alone knows when its entries were made.
    @discardableResult
    public func purge(olderThan date: Date) async throws(CacheError) -> Int {
        var removed = 0
        if let variants = self.variants {
            guard let disk = variants as? any EnumerableDataCaching else {
                throw CacheError(
                    .invalidConfiguration,
                    "Purging by age needs variants in an EnumerableDataCaching, such as DiskCache; nothing was removed."
                )
            }
            // Memory does not know when its variants were made: it reads them from disk again.
            let forget = { self.variantMemory.removeAll() }
            removed += try self.removing(forgetting: forget) { () throws(CacheError) in
                try disk.removeEntries(createdBefore: date)
            }
        }
        return removed + (try await self.loader.removeResponses(storedBefore: date))
    }

    /// Removes the variants made of the original at `url` (every processing and encoding of
    /// it), from memory and from `variants`, so that the next request for one makes it anew
    /// from the original. The original itself is the loader's to remove
    /// (`ResourceLoader.removeResponses(for:)`).
    ///
    /// - Returns: How many variants were removed from `variants`.
    /// - Throws: `CacheError` if `variants` could not be read or changed, or is not a
    ///   `DiskCache`, which alone lists its keys.
    /// - Complexity: O(*n*) in the number of stored variants: for administration.
    @discardableResult
    public func removeVariants(of url: URL) throws(CacheError) -> Int {
        let original = Self.key(for: url, processors: [])
        // Its variants: `#` and processors, or `@` and an encoding (which may also catch another
        // original whose path goes on with `@`, such as a.jpg@2x.png: remade, no harm).
        return try self.removeVariants { key in
            key == original || key.hasPrefix(original + "#") || key.hasPrefix(original + "@")
        }
    }

    /// Removes the variants of every original whose URL, in key form (as `CacheKey` writes
    /// it), starts with `prefix`, from memory and from `variants`.
    ///
    /// - Returns: How many variants were removed from `variants`.
    /// - Throws: as ``removeVariants(of:)``.
    /// - Complexity: O(*n*) in the number of stored variants.
    @discardableResult
    public func removeVariants(withPrefix prefix: String) throws(CacheError) -> Int {
        try self.removeVariants { $0.hasPrefix(prefix) }
    }

    /// Removes the variants whose keys `isRemoved` accepts, from memory and from `variants`.
    private func removeVariants(where isRemoved: (String) -> Bool) throws(CacheError) -> Int {
        let forget = {
            self.memory.removeValues { key, _ in isRemoved(key) }
            self.variantMemory.removeValues { key, _ in isRemoved(key) }
        }
        guard let variants = self.variants else {
            try self.removing(forgetting: forget) {}
            return 0
        }
        guard let disk = variants as? DiskCache else {
            throw CacheError(
                .invalidConfiguration,
                "Removing an original's variants needs variants in a DiskCache, which lists its keys; none was removed."
            )
        }
        return try self.removing(forgetting: forget) { () throws(CacheError) in
            var removed = 0
            for entry in try disk.entries() where isRemoved(entry.key) {
                if try disk.removeValue(forKey: entry.key) { removed += 1 }
            }
            return removed
        }
    }

    /// Removes every bitmap from memory, every variant, and every response the loader stored.
    ///
    /// - Throws: `CacheError` if `variants` or one of the loader's tiers could not be emptied;
    ///   memory is emptied first, whatever happens after.
    public func clearAll() async throws(CacheError) {
        let forget = {
            self.memory.removeAll()
            self.variantMemory.removeAll()
        }
        try self.removing(forgetting: forget) { () throws(CacheError) in try self.variants?.removeAll() }
        try await self.loader.removeAllResponses()
    }

    /// The bytes on disk of originals (the loader's disk tier) and variants together; `nil` if
    /// either is kept in something other than a `DiskCache`. A pipeline without `variants`
    /// counts the originals alone.
    ///
    /// - Throws: `CacheError` with code `fileSystem` if a disk cache's lock or journal could not be
    ///   read.
    public var diskSize: Int? {
        get throws(CacheError) {
            let variants: Int? =
                if let variants = self.variants { try (variants as? any SizedDataCaching)?.totalSize } else { 0 }
            guard let variants, let originals = try self.loader.diskSize else { return nil }
            return variants + originals
        }
    }
}

/// Images a ``ImagePipeline/prefetch(_:processors:decoding:priority:)`` loads: each can be
/// cancelled, and all waited for.
public final class ImagePrefetch: Sendable {
    private let tasks: [URL: Task<Bool, Never>]

    init(urls: [URL], load: @escaping @Sendable (URL) async throws -> Void) {
        var tasks: [URL: Task<Bool, Never>] = [:]
        for url in urls where tasks[url] == nil {
            tasks[url] = Task(priority: .utility) {
                do {
                    try await load(url)
                    return true
                } catch {
                    return false
                }
            }
        }
        self.tasks = tasks
    }

    deinit {
        self.cancel()
    }

    /// Cancels every load that has not finished.
    public func cancel() {
        for task in self.tasks.values { task.cancel() }
    }

    /// Cancels the load of `url`, if it has not finished.
    public func cancel(_ url: URL) {
        self.tasks[url]?.cancel()
    }

    /// Waits until every load has finished or been cancelled.
    ///
    /// - Returns: How many images were loaded (a cancelled or failed one is not).
    @discardableResult
    public func wait() async -> Int {
        var loaded = 0
        for task in self.tasks.values where await task.value { loaded += 1 }
        return loaded
    }
}
