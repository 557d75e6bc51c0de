import Foundation

/// A response that a ``ResourceLoader`` stored in a ``DiskCache``, as tools list it.
public struct StoredResponseEntry: Sendable {
    /// The URL it answers, in key form (or as the loader's key transform made it).
    public var url: String
    /// The stored head: status, fields, the times of the exchange, and the request fields that
    /// selected it if it varies.
    public var response: StoredResponse
    /// The size of its body, in bytes.
    public var bodySize: Int
    /// The size of its file, in bytes: what it counts against the cache's size limit.
    public var fileSize: Int
    /// When it was stored.
    public var stored: Date
    /// When it was last used.
    public var lastAccessed: Date
}

extension DiskCache {
    /// The responses a ``ResourceLoader`` stored in this cache, least recently used first, read
    /// without their bodies and without counting as uses.
    ///
    /// Entries that are not responses are skipped: the record of the fields a URL's responses
    /// vary on, and anything else stored in the same cache.
    ///
    /// - Throws: ``CacheError`` if the lock or the journal cannot be used, or an entry's file
    ///   exists but cannot be read.
    public func storedResponses() throws(CacheError) -> [StoredResponseEntry] {
        var responses: [StoredResponseEntry] = []
        for info in try self.entries() {
            // An entry removed since the listing (by another process, say) is simply not listed.
            guard let (metadata, bodySize) = try self.metadata(forKey: info.key),
                let response = StoredResponse(decoding: metadata)
            else { continue }
            responses.append(
                StoredResponseEntry(
                    url: String(info.key.prefix { $0 != "\n" }),
                    response: response,
                    bodySize: bodySize,
                    fileSize: info.size,
                    stored: info.created,
                    lastAccessed: info.lastAccessed
                )
            )
        }
        return responses
    }
}
