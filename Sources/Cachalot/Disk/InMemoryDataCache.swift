import Foundation
import Synchronization

/// A ``DataCaching`` store that keeps its entries in memory, for tests and previews.
///
/// It has no limits and forgets everything when released; use ``DiskCache`` to persist.
public final class InMemoryDataCache: DataCaching {
    private let entries = Mutex<[String: DataCacheEntry]>([:])
    private let now: @Sendable () -> Date

    /// Creates an empty store.
    ///
    /// - Parameter now: The clock that dates entries. Default: the system's.
    public init(now: @escaping @Sendable () -> Date = { Date() }) {
        self.now = now
    }

    /// The entry stored for `key`, or `nil`. Never throws.
    public func entry(forKey key: String) throws(CacheError) -> DataCacheEntry? {
        self.entries.withLock { $0[key] }
    }

    /// Whether an entry is stored for `key`. Never throws.
    public func contains(_ key: String) throws(CacheError) -> Bool {
        self.entries.withLock { $0[key] != nil }
    }

    /// Whether an entry is stored for `key`: memory is read without waiting.
    public func mayContain(_ key: String) -> Bool {
        self.entries.withLock { $0[key] != nil }
    }

    /// Stores `data` and `metadata` for `key`, dated by the store's clock, replacing any entry.
    /// Never throws.
    public func set(_ data: Data, forKey key: String, metadata: Data) throws(CacheError) {
        let entry = DataCacheEntry(key: key, data: data, metadata: metadata, created: self.now())
        self.entries.withLock { $0[key] = entry }
    }

    /// Removes the entry for `key`; returns whether there was one. Never throws.
    @discardableResult
    public func removeValue(forKey key: String) throws(CacheError) -> Bool {
        self.entries.withLock { $0.removeValue(forKey: key) != nil }
    }

    /// Removes every entry. Never throws.
    public func removeAll() throws(CacheError) {
        self.entries.withLock { $0.removeAll() }
    }
}

/// An ``InMemoryDataCache`` can stand in for a shared tier too, in tests and previews.
extension InMemoryDataCache: AsyncDataCaching {
    /// Removes every entry that `isRemoved` accepts, given its key and metadata; returns how many
    /// were removed. Never throws.
    public func removeValues(
        where isRemoved: @escaping @Sendable (_ key: String, _ metadata: Data) -> Bool
    ) throws(CacheError) -> Int {
        self.entries.withLock { entries in
            let doomed = entries.values.filter { isRemoved($0.key, $0.metadata) }.map(\.key)
            for key in doomed { entries.removeValue(forKey: key) }
            return doomed.count
        }
    }
}
