import Foundation

/// An entry of a ``DataCaching`` store: bytes with their metadata.
public struct DataCacheEntry: Hashable, Sendable {
    /// The key it was stored under.
    public var key: String
    /// The bytes stored.
    public var data: Data
    /// The metadata stored with them (the HTTP layer keeps the response head here).
    public var metadata: Data
    /// When it was stored.
    public var created: Date

    /// Creates an entry.
    public init(key: String, data: Data, metadata: Data, created: Date) {
        self.key = key
        self.data = data
        self.metadata = metadata
        self.created = created
    }
}

/// A store of bytes and metadata under string keys.
///
/// ``DiskCache`` is the store that persists; ``InMemoryDataCache`` keeps entries in memory, so
/// that code written against `DataCaching` can be tested without a disk.
public protocol DataCaching: Sendable {
    /// The entry stored for `key`, or `nil`.
    ///
    /// - Throws: ``CacheError`` if the store cannot be read. A store should answer `nil`, not
    ///   throw, for an entry it finds damaged.
    func entry(forKey key: String) throws(CacheError) -> DataCacheEntry?
    /// Whether an entry is stored for `key`, without counting it as a use.
    ///
    /// - Throws: ``CacheError`` if the store cannot be read.
    func contains(_ key: String) throws(CacheError) -> Bool
    /// Whether an entry may be stored for `key`, told without waiting: without a lock, a read
    /// of a file or a write. `false` only when there is none; an error is for a read to report.
    /// A thread that must never wait (an event loop) asks it before it leaves a read that may
    /// wait to another thread. Default: `true`, for a store that cannot tell so.
    func mayContain(_ key: String) -> Bool
    /// Stores `data` and `metadata` for `key`, replacing any entry.
    ///
    /// - Throws: ``CacheError`` if the store cannot be written (``CacheError/Code/outOfSpace`` on
    ///   a full disk); the previous entry, if any, should then stay.
    func set(_ data: Data, forKey key: String, metadata: Data) throws(CacheError)
    /// Removes the entry for `key`; returns whether there was one.
    ///
    /// - Throws: ``CacheError`` if the store cannot be changed.
    @discardableResult
    func removeValue(forKey key: String) throws(CacheError) -> Bool
    /// Removes every entry.
    ///
    /// - Throws: ``CacheError`` if the store cannot be changed.
    func removeAll() throws(CacheError)
}

extension DataCaching {
    /// `true`: a store that cannot tell without waiting whether it holds an entry may hold it.
    public func mayContain(_ key: String) -> Bool { true }

    /// The bytes stored for `key`, or `nil`.
    ///
    /// - Throws: what ``entry(forKey:)`` throws.
    public func data(forKey key: String) throws(CacheError) -> Data? {
        try self.entry(forKey: key)?.data
    }

    /// Stores `data` without metadata for `key`.
    ///
    /// - Throws: what ``set(_:forKey:metadata:)`` throws.
    public func set(_ data: Data, forKey key: String) throws(CacheError) {
        try self.set(data, forKey: key, metadata: Data())
    }
}
