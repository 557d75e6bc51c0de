import Foundation
import HTTPTypes

extension ResourceLoader {
    /// Removes what is stored for `url`, every `Vary` variant of it included, from memory and
    /// disk: the next load of it goes to the origin.
    ///
    /// - Returns: How many entries were removed (a URL that varies has one entry for the URL
    ///   and one per variant, in each tier).
    /// - Throws: ``CacheError`` if the disk tier could not be read or changed (what could be
    ///   removed was), or is not a ``DiskCache``, which alone can list its keys.
    /// - Complexity: O(*n*) in the number of stored entries: for administration, not a hot path.
    @discardableResult
    public func removeResponses(for url: URL) throws(CacheError) -> Int {
        guard let key = ResponseKey(of: HTTPRequest(method: .get, url: url), transform: self.configuration.keyTransform)
        else { return 0 }
        let url = key.string
        let variants = url + "\n"
        return try self.removeResponses { $0 == url || $0.hasPrefix(variants) }
    }

    /// Removes every stored response whose URL starts with `prefix` (as the loader keys it:
    /// `http://host:port/path?query`, the scheme and host in lowercase, no default port), with
    /// its variants.
    ///
    /// - Returns: How many entries were removed.
    /// - Throws: ``CacheError`` if the disk tier could not be read or changed.
    /// - Complexity: O(*n*) in the number of stored entries.
    @discardableResult
    public func removeResponses(withPrefix prefix: String) throws(CacheError) -> Int {
        try self.removeResponses { $0.hasPrefix(prefix) }
    }

    /// Removes every entry whose key `isRemoved` accepts, in memory and on disk.
    private func removeResponses(where isRemoved: (String) -> Bool) throws(CacheError) -> Int {
        let disk = self.store.disk as? DiskCache
        guard disk != nil || self.store.disk == nil else {
            throw .invalidConfiguration(
                "Removing responses by URL needs a disk tier that lists its keys (a DiskCache); nothing was removed."
            )
        }
        var removed = self.store.memory?.removeValues { isRemoved($0.string) } ?? 0
        guard let disk else { return removed }
        for entry in try disk.entries() where isRemoved(entry.key) {
            if try disk.removeValue(forKey: entry.key) { removed += 1 }
        }
        return removed
    }
}
