import Foundation
import HTTPTypes

extension ResourceLoader {
    /// Removes what is stored for `url`, every `Vary` variant of it included, from every tier:
    /// the next load of it goes to the origin.
    ///
    /// - Returns: How many entries were removed (a URL that varies has one entry for the URL
    ///   and one per variant, in each tier).
    /// - Throws: ``CacheError`` if the disk tier could not be read or changed (what could be
    ///   removed was), or is not a ``DiskCache``, which alone can list its keys.
    /// - Complexity: O(*n*) in the number of stored entries: for administration, not a hot path.
    @discardableResult
    public func removeResponses(for url: URL) async throws(CacheError) -> Int {
        guard let key = ResponseKey(of: HTTPRequest(method: .get, url: url), transform: self.configuration.keyTransform)
        else { return 0 }
        let url = key.string
        let variants = url + "\n"
        return try await self.removeResponses { key, _ in key == url || key.hasPrefix(variants) }
    }

    /// Removes every stored response whose URL starts with `prefix` (as the loader keys it:
    /// `http://host:port/path?query`, the scheme and host in lowercase, no default port), with
    /// its variants.
    ///
    /// - Returns: How many entries were removed.
    /// - Throws: ``CacheError`` if the disk tier could not be read or changed.
    /// - Complexity: O(*n*) in the number of stored entries.
    @discardableResult
    public func removeResponses(withPrefix prefix: String) async throws(CacheError) -> Int {
        try await self.removeResponses { key, _ in key.hasPrefix(prefix) }
    }

    /// Removes every stored response tagged with `tag`: one of the surrogate keys its origin
    /// sent in `Surrogate-Key` (separated by spaces, as Fastly and Varnish's xkey read it) or
    /// `Cache-Tag` (separated by commas, as Cloudflare reads it). Tags are compared exactly.
    ///
    /// - Returns: How many entries were removed.
    /// - Throws: ``CacheError`` if the disk tier could not be read or changed.
    /// - Complexity: O(*n*) in the number of stored entries, each read from disk for its head.
    @discardableResult
    public func removeResponses(taggedWith tag: String) async throws(CacheError) -> Int {
        try await self.removeResponses { _, stored in stored()?.surrogateKeys.contains(tag) ?? false }
    }

    /// Removes every stored response received before `date` (a revalidated one counts from its
    /// last 304), from every tier.
    ///
    /// - Returns: How many entries were removed.
    /// - Throws: ``CacheError`` if the disk tier could not be read or changed.
    /// - Complexity: O(*n*) in the number of stored entries, each read from disk for its head.
    @discardableResult
    public func removeResponses(storedBefore date: Date) async throws(CacheError) -> Int {
        try await self.removeResponses { _, stored in stored().map { $0.responseTime < date } ?? false }
    }

    /// Removes every stored response, from every tier.
    ///
    /// - Returns: How many entries were removed.
    /// - Throws: ``CacheError`` if the disk tier could not be read or changed.
    @discardableResult
    public func removeAllResponses() async throws(CacheError) -> Int {
        try await self.removeResponses { _, _ in true }
    }

    /// The bytes the disk tier holds, if it is a ``DiskCache`` (`nil` for another kind, 0 for none).
    ///
    /// - Throws: ``CacheError`` with code `fileSystem` if the disk cache's lock or journal could
    ///   not be read.
    public var diskSize: Int? {
        get throws(CacheError) {
            guard let disk = self.store.disk else { return 0 }
            return try (disk as? any SizedDataCaching)?.totalSize
        }
    }

    /// Removes every entry that `isRemoved` accepts, given its key and a way to read its stored
    /// response (`nil` for a list of variants), in every tier, once the writes queued before
    /// are made.
    private func removeResponses(
        where isRemoved: @escaping @Sendable (_ key: String, _ stored: () -> StoredResponse?) -> Bool
    ) async throws(CacheError) -> Int {
        try await self.removals.run { () async throws(CacheError) in
            // A write queued before the purge must not land after it and bring back what it removed.
            let ticket = self.writes.enqueue(bytes: 0) {}
            self.writes.drain()
            await self.writes.wait(untilMade: ticket)
            await self.sharedWrites.waitForWrites(to: nil)
            // The shared tiers first: a load meanwhile cannot bring back from them what memory
            // and disk no longer hold. A tier that fails does not stop the others.
            var removed = 0
            var failure: CacheError?
            for tier in self.store.shared {
                do throws(CacheError) {
                    removed += try await tier.removeValues { key, metadata in
                        isRemoved(key) { StoredResponse(decoding: metadata) }
                    }
                } catch {
                    failure = error
                }
            }
            removed += try self.removeLocalResponses(where: isRemoved)
            if let failure { throw failure }
            return removed
        }
    }

    /// Removes every entry that `isRemoved` accepts in memory and on disk.
    private func removeLocalResponses(
        where isRemoved: (_ key: String, _ stored: () -> StoredResponse?) -> Bool
    ) throws(CacheError) -> Int {
        let disk = self.store.disk as? any EnumerableDataCaching
        guard disk != nil || self.store.disk == nil else {
            throw .invalidConfiguration(
                "Removing responses by URL or tag needs a disk tier that lists its keys (an EnumerableDataCaching, "
                    + "such as DiskCache); nothing was removed."
            )
        }
        var removed =
            self.store.memory?.removeValues { key, entry in
                isRemoved(key.string) {
                    guard case .response(let response) = entry else { return nil }
                    return response.stored
                }
            } ?? 0
        guard let disk else { return removed }
        for entry in try disk.entries() {
            var failure: CacheError?
            let matches = isRemoved(entry.key) {
                do throws(CacheError) {
                    return try disk.metadata(forKey: entry.key).flatMap { StoredResponse(decoding: $0.metadata) }
                } catch {
                    failure = error
                    return nil
                }
            }
            if let failure { throw failure }
            if matches, try disk.removeValue(forKey: entry.key) { removed += 1 }
        }
        return removed
    }
}
