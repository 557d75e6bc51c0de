import Foundation

/// A data cache that knows how much it holds and how much it may hold.
///
/// ``ResourceLoader`` sizes its largest stored entry from ``sizeLimit``, and reports
/// ``totalSize`` as its disk size. ``DiskCache`` is one.
public protocol SizedDataCaching: DataCaching {
    /// The space the entries take, in bytes.
    ///
    /// - Throws: ``CacheError`` if the cache cannot be read.
    var totalSize: Int { get throws(CacheError) }
    /// The most space the entries may take, in bytes; `nil` if it has no limit.
    var sizeLimit: Int? { get }
}

/// A data cache that lists what it holds: what removal by URL, prefix, tag or age needs.
///
/// ``DiskCache`` is one.
public protocol EnumerableDataCaching: DataCaching {
    /// Every entry's key, size and dates.
    ///
    /// - Throws: ``CacheError`` if the cache cannot be read.
    func entries() throws(CacheError) -> [DiskCache.EntryInfo]

    /// The metadata stored with the entry for `key`, and the size of its body, without reading
    /// the body; `nil` if there is none.
    ///
    /// - Throws: ``CacheError`` if the entry cannot be read.
    func metadata(forKey key: String) throws(CacheError) -> (metadata: Data, bodySize: Int)?

    /// Removes the entries stored before `date`; returns how many.
    ///
    /// - Throws: ``CacheError`` if the cache cannot be changed.
    @discardableResult
    func removeEntries(createdBefore date: Date) throws(CacheError) -> Int
}

/// Writes one entry of a data cache in pieces, and makes it visible only when it is whole.
public protocol DataCacheWriting: AnyObject {
    /// Appends `chunk` to the body.
    ///
    /// - Throws: ``CacheError`` if the write fails.
    func append(_ chunk: Data) throws(CacheError)
    /// Makes the entry visible to readers, in place of any stored before under its key.
    ///
    /// - Throws: ``CacheError`` if the entry cannot be stored.
    func commit() throws(CacheError)
    /// The body written so far, read back without copying it into memory where the cache can.
    ///
    /// - Throws: ``CacheError`` if the body cannot be read back.
    func mappedBody() throws(CacheError) -> Data
    /// Drops what was written; the entry stored before under the key, if any, stays.
    func discard()
}

/// A data cache that takes an entry in pieces as it arrives, so that a large body is never
/// held in memory whole: what ``ResourceLoader`` spools large responses to.
///
/// ``DiskCache`` is one.
public protocol StreamingDataCaching: DataCaching {
    /// A writer of the entry for `key`, with `metadata`.
    ///
    /// - Throws: ``CacheError`` if the entry cannot be begun.
    func makeEntryWriter(forKey key: String, metadata: Data) throws(CacheError) -> any DataCacheWriting
}

extension DiskCache: SizedDataCaching, EnumerableDataCaching, StreamingDataCaching {
    /// The configuration's size limit.
    public var sizeLimit: Int? { self.configuration.sizeLimit }

    /// A ``Writer`` of the entry for `key` (see ``makeWriter(forKey:metadata:)``).
    ///
    /// - Throws: What ``makeWriter(forKey:metadata:)`` throws.
    public func makeEntryWriter(forKey key: String, metadata: Data) throws(CacheError) -> any DataCacheWriting {
        try self.makeWriter(forKey: key, metadata: metadata)
    }
}

extension DiskCache.Writer: DataCacheWriting {}
