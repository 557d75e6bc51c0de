import Foundation

/// A memory cache of ready-to-use values over a store of their bytes, with a codec between them.
///
/// With `Bitmap`, `ImageEncoder` and `ImageDecoder` from `CachalotImages`:
///
/// ```swift
/// let images = try TieredCache(
///     memory: MemoryCache<String, Bitmap>(),
///     disk: DiskCache(directory: cacheDirectory),
///     codec: .init(
///         encode: { try ImageEncoder.png($0) },
///         decode: { try ImageDecoder().decode($0) },
///         cost: { $0.cost }
///     )
/// )
/// let bitmap = try images.value(forKey: url)  // memory, else disk (then kept in memory)
/// ```
///
/// A get looks in memory first; on a miss it reads the bytes from the store, decodes them and
/// keeps the value in memory. A set and a removal reach both tiers. Bytes that the codec cannot
/// decode are treated as no entry and removed from the store.
public final class TieredCache<Value: Sendable>: Sendable {
    /// How values become bytes and back, and what a value costs in memory.
    public struct Codec: Sendable {
        /// Turns a value into the bytes the store keeps. An error it throws makes
        /// ``TieredCache/set(_:forKey:metadata:)`` throw ``CacheError/Code/invalidArgument``. No
        /// default.
        public var encode: @Sendable (Value) throws -> Data
        /// Turns stored bytes back into a value. An error it throws makes the bytes read as no
        /// entry, and they are removed from the store. No default.
        public var decode: @Sendable (Data) throws -> Value
        /// The value's cost against the memory tier's cost limit, such as its size in bytes; a
        /// negative cost counts as 0. No default.
        public var cost: @Sendable (Value) -> Int

        /// Creates a codec.
        ///
        /// - Parameters:
        ///   - encode: Turns a value into bytes; it may throw.
        ///   - decode: Turns bytes into a value; it may throw.
        ///   - cost: A value's cost in the memory tier (a negative one counts as 0).
        public init(
            encode: @escaping @Sendable (Value) throws -> Data,
            decode: @escaping @Sendable (Data) throws -> Value,
            cost: @escaping @Sendable (Value) -> Int
        ) {
            self.encode = encode
            self.decode = decode
            self.cost = cost
        }
    }

    /// The memory tier.
    public let memory: MemoryCache<String, Value>
    /// The store of bytes, usually a ``DiskCache``.
    public let disk: any DataCaching
    /// The codec between them.
    public let codec: Codec

    /// Puts `memory` over `disk`.
    public init(memory: MemoryCache<String, Value>, disk: any DataCaching, codec: Codec) {
        self.memory = memory
        self.disk = disk
        self.codec = codec
    }

    /// The value for `key` from memory, else decoded from the store and then kept in memory;
    /// `nil` if neither has it.
    ///
    /// - Throws: ``CacheError`` if the store cannot be read.
    public func value(forKey key: String) throws(CacheError) -> Value? {
        if let value = self.memory.value(forKey: key) { return value }
        guard let data = try self.disk.data(forKey: key) else { return nil }
        guard let value = try? self.codec.decode(data) else {
            try self.disk.removeValue(forKey: key)
            return nil
        }
        try? self.memory.set(value, forKey: key, cost: max(0, self.codec.cost(value)))
        return value
    }

    /// Stores `value` in memory and its bytes, with `metadata`, in the store.
    ///
    /// - Parameters:
    ///   - value: The value.
    ///   - key: Its key in both tiers.
    ///   - metadata: Stored with the bytes. Default: empty.
    ///
    /// - Throws: ``CacheError/Code/invalidArgument`` if the codec cannot encode the value (then
    ///   neither tier changes), or the store's error.
    public func set(_ value: Value, forKey key: String, metadata: Data = Data()) throws(CacheError) {
        let data: Data
        do {
            data = try self.codec.encode(value)
        } catch {
            throw .invalidArgument("The codec could not encode the value for \(key): \(error)")
        }
        try self.disk.set(data, forKey: key, metadata: metadata)
        try self.memory.set(value, forKey: key, cost: max(0, self.codec.cost(value)))
    }

    /// Removes the value for `key` from both tiers.
    ///
    /// - Throws: ``CacheError`` if the store cannot remove it; memory has forgotten it already.
    public func removeValue(forKey key: String) throws(CacheError) {
        self.memory.removeValue(forKey: key)
        try self.disk.removeValue(forKey: key)
    }

    /// Removes every value from both tiers.
    ///
    /// - Throws: ``CacheError`` if the store cannot be emptied; memory is empty already.
    public func removeAll() throws(CacheError) {
        self.memory.removeAll()
        try self.disk.removeAll()
    }
}
