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
    /// - Complexity: O(*n*) in the number of entries in memory and on disk: for administration,
    ///   not a hot path. A shared tier may find them through an index (see
    ///   ``AsyncDataCaching/removeValues(matching:)``).
    @discardableResult
    public func removeResponses(for url: URL) async throws(CacheError) -> Int {
        guard let key = ResponseKey(of: HTTPRequest(method: .get, url: url), transform: self.configuration.keyTransform)
        else { return 0 }
        return try await self.tiers.remove(.url(key.string))
    }

    /// Removes every stored response whose URL starts with `prefix` (as the loader keys it:
    /// `http://host:port/path?query`, the scheme and host in lowercase, no default port), with
    /// its variants.
    ///
    /// - Returns: How many entries were removed.
    /// - Throws: ``CacheError`` if the disk tier could not be read or changed.
    /// - Complexity: O(*n*) in the number of entries in memory and on disk; a shared tier may
    ///   find them through an index.
    @discardableResult
    public func removeResponses(withPrefix prefix: String) async throws(CacheError) -> Int {
        try await self.tiers.remove(.prefix(prefix))
    }

    /// Removes every stored response tagged with `tag`: one of the surrogate keys its origin
    /// sent in `Surrogate-Key` (separated by spaces, as Fastly and Varnish's xkey read it) or
    /// `Cache-Tag` (separated by commas, as Cloudflare reads it). Tags are compared exactly.
    ///
    /// - Returns: How many entries were removed.
    /// - Throws: ``CacheError`` if the disk tier could not be read or changed.
    /// - Complexity: O(*n*) in the number of entries in memory and on disk, each read from disk
    ///   for its head; a shared tier may find them through an index.
    @discardableResult
    public func removeResponses(taggedWith tag: String) async throws(CacheError) -> Int {
        try await self.tiers.remove(.tag(tag))
    }

    /// Removes every stored response received before `date` (a revalidated one counts from its
    /// last 304), from every tier.
    ///
    /// - Returns: How many entries were removed.
    /// - Throws: ``CacheError`` if the disk tier could not be read or changed.
    /// - Complexity: O(*n*) in the number of stored entries, each read from disk for its head.
    @discardableResult
    public func removeResponses(storedBefore date: Date) async throws(CacheError) -> Int {
        try await self.tiers.remove(.storedBefore(date))
    }

    /// Removes every stored response, from every tier.
    ///
    /// - Returns: How many entries were removed.
    /// - Throws: ``CacheError`` if the disk tier could not be read or changed.
    @discardableResult
    public func removeAllResponses() async throws(CacheError) -> Int {
        try await self.tiers.remove(.all)
    }

    /// The bytes the disk tier holds, if it is a ``DiskCache`` (`nil` for another kind, 0 for none).
    ///
    /// - Throws: ``CacheError`` with code `fileSystem` if the disk cache's lock or journal could
    ///   not be read.
    public var diskSize: Int? {
        get throws(CacheError) {
            guard let disk = self.tiers.disk else { return 0 }
            return try (disk as? any SizedDataCaching)?.totalSize
        }
    }
}
