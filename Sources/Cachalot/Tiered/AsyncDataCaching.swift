import Foundation

/// A store of bytes and metadata under string keys that answers after a wait: a database or
/// another server, shared by the machines of a fleet.
///
/// A ``ResourceLoader`` puts such stores below its memory and disk tiers, in the order given
/// (see ``ResourceLoader/init(configuration:transport:disk:shared:now:logger:)``):
///
/// - A load asks them, first to last, only when memory and disk have nothing it may use
///   without the origin, so that a memory or disk hit never waits for them.
/// - An entry found in one is promoted to every tier above it: memory, disk, and the stores
///   before it.
/// - A response from the origin is written to every tier; the writes to these stores are made in
///   the background and never delay the answer.
/// - An invalidation or a purge reaches every tier.
///
/// A store that fails or is slow should throw rather than wait: the loader reads a failure as
/// a miss of that store and goes on to the next one, and then to the origin. `CachalotPostgres`
/// has one on PostgreSQL.
public protocol AsyncDataCaching: Sendable {
    /// The most bytes of value (a response's body) one entry may hold: the loader writes no
    /// larger one to the store. Default: no limit.
    var maximumEntrySize: Int { get }
    /// The entry stored for `key`, or `nil`.
    ///
    /// - Throws: ``CacheError`` if the store cannot be read (in time).
    func entry(forKey key: String) async throws(CacheError) -> DataCacheEntry?
    /// Stores `data` and `metadata` for `key`, replacing any entry.
    ///
    /// - Throws: ``CacheError`` if the store cannot be written (in time); the loader counts the
    ///   failure and goes on.
    func set(_ data: Data, forKey key: String, metadata: Data) async throws(CacheError)
    /// Removes the entry for `key`; returns whether there was one.
    ///
    /// - Throws: ``CacheError`` if the store cannot be changed (in time).
    @discardableResult
    func removeValue(forKey key: String) async throws(CacheError) -> Bool
    /// Removes every entry that `isRemoved` accepts, given its key and its metadata; returns
    /// how many were removed. For administration (purges), not for a hot path.
    ///
    /// - Throws: ``CacheError`` if the store cannot be read or changed.
    func removeValues(
        where isRemoved: @escaping @Sendable (_ key: String, _ metadata: Data) -> Bool
    ) async throws(CacheError) -> Int
    /// Removes every entry that `removal` names (see ``CacheRemoval/matches(key:stored:)``, the
    /// metadata being a ``StoredResponse``'s); returns how many were removed. A store that
    /// indexes keys or tags finds them without reading the other entries; the default reads
    /// every entry through ``removeValues(where:)``.
    ///
    /// - Throws: ``CacheError`` if the store cannot be read or changed.
    func removeValues(matching removal: CacheRemoval) async throws(CacheError) -> Int
    /// Removes every entry.
    ///
    /// - Throws: ``CacheError`` if the store cannot be changed.
    func removeAll() async throws(CacheError)
}

extension AsyncDataCaching {
    /// No limit.
    public var maximumEntrySize: Int { .max }

    /// Removes every entry that `removal` names through ``removeValues(where:)``, which reads
    /// every entry's key and metadata.
    ///
    /// - Throws: what ``removeValues(where:)`` throws.
    public func removeValues(matching removal: CacheRemoval) async throws(CacheError) -> Int {
        try await self.removeValues { key, metadata in
            removal.matches(key: key) { StoredResponse(decoding: metadata) }
        }
    }
}
