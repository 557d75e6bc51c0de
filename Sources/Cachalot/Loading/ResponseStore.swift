import Foundation
import HTTPTypes

/// A response with its body, as the loader keeps it: one object, so that a memory hit
/// copies a reference rather than the head's many parts.
final class CachedResponse: Sendable {
    let stored: StoredResponse
    let body: Data

    init(stored: StoredResponse, body: Data) {
        self.stored = stored
        self.body = body
    }

    /// The memory it holds, roughly: the body, and the head's fields.
    var cost: Int {
        self.body.count + self.stored.headCost
    }
}

/// What is kept under one key.
enum StoredEntry: Sendable {
    case response(CachedResponse)
    /// The URL's responses vary on these lowercased fields; each variant has its own key (see
    /// ``ResponseKey/variant(names:request:)``).
    case variants([String])
}

/// Where a stored response was found.
enum StorageTier: Sendable, Equatable {
    case memory, disk
    /// The shared tier at this index of ``ResponseStore/shared``.
    case shared(Int)
}

/// The loader's responses in the memory tier, over the disk tier, over the shared tiers that
/// answer after a wait: keys, variants, and the metadata format. A hit in a tier is promoted to
/// every tier above it; a store and a removal reach every tier.
struct ResponseStore: Sendable {
    let memory: MemoryCache<ResponseKey, StoredEntry>?
    let disk: (any DataCaching)?
    /// The tiers below the disk, in order; asked only by ``lookupShared(_:for:failed:)``.
    let shared: [any AsyncDataCaching]
    /// The disk tier, if it can take a body as it arrives.
    let streamingDisk: (any StreamingDataCaching)?
    /// The reads of the shared tiers in flight, shared by identical lookups.
    let sharedReads = ReadFlights<Result<StoredEntry?, CacheError>>()

    init(
        memory: MemoryCache<ResponseKey, StoredEntry>?,
        disk: (any DataCaching)?,
        shared: [any AsyncDataCaching]
    ) {
        self.memory = memory
        self.disk = disk
        self.streamingDisk = disk as? any StreamingDataCaching
        self.shared = shared
    }

    /// The stored response that `request` selects under `url`, and where it was.
    func lookup(_ url: ResponseKey, for request: HTTPRequest, readsDisk: Bool = true) throws(CacheError) -> Lookup {
        guard let (entry, tier) = try self.entry(url, readsDisk: readsDisk) else { return .absent }
        switch entry {
        case .response(let response):
            return .found(response, tier)
        case .variants(let names):
            guard let (entry, tier) = try self.entry(url.variant(names: names, request: request), readsDisk: readsDisk),
                case .response(let response) = entry
            else { return .otherVariants }
            return .found(response, tier)
        }
    }

    /// What is stored for a request.
    enum Lookup {
        /// The response for the request (for its variant, if the URL's responses vary), and the
        /// tier it came from.
        case found(CachedResponse, StorageTier)
        /// Nothing for the request's URL.
        case absent
        /// Responses for the URL that vary, none of them for the request's variant.
        case otherVariants
    }

    /// The stored response that `request` selects under `url` in the shared tiers, from the
    /// first that has one, and the index of that tier; `nil` if none has one. A tier that fails
    /// counts as one that has none: `failed` is told of its error. Nothing is stored: the caller
    /// promotes the response (``store(_:url:request:sharedTiers:)``) if it uses it.
    func lookupShared(
        _ url: ResponseKey,
        for request: HTTPRequest,
        failed: (CacheError) -> Void
    ) async -> (response: CachedResponse, tier: Int)? {
        for (index, tier) in self.shared.enumerated() {
            do throws(CacheError) {
                guard let entry = try await self.sharedEntry(url, in: tier, at: index) else { continue }
                var found = entry
                if case .variants(let names) = entry {
                    let variantKey = url.variant(names: names, request: request)
                    guard let variant = try await self.sharedEntry(variantKey, in: tier, at: index) else { continue }
                    found = variant
                }
                guard case .response(let response) = found else { continue }
                return (response, index)
            } catch {
                failed(error)
            }
        }
        return nil
    }

    /// The entry under `key` in `tier`, the shared tier at `index`: read once for every lookup
    /// of it that comes while it is read.
    private func sharedEntry(
        _ key: ResponseKey,
        in tier: any AsyncDataCaching,
        at index: Int
    ) async throws(CacheError) -> StoredEntry? {
        let result = await self.sharedReads.value(for: "\(index) \(key.string)") {
            do throws(CacheError) {
                return .success(try await Self.entry(key, in: tier))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private static func entry(
        _ key: ResponseKey,
        in tier: any AsyncDataCaching
    ) async throws(CacheError)
        -> StoredEntry?
    {
        guard let stored = try await tier.entry(forKey: key.string) else { return nil }
        guard let entry = Self.decode(stored) else {
            // Metadata this version cannot read: the entry is of no use.
            try await tier.removeValue(forKey: key.string)
            return nil
        }
        return entry
    }

    /// Stores `response` to `request` under `url`, or under its variant's key if it varies, in
    /// memory at once; returns the writes to the disk tier and to `sharedTiers` (default: every
    /// shared tier), for the caller to make when it suits.
    func store(
        _ response: CachedResponse,
        url: ResponseKey,
        request: HTTPRequest,
        sharedTiers: Range<Int>? = nil
    ) -> Writes {
        let (key, names) = self.key(for: response.stored, url: url, request: request)
        let entries: [(StoredEntry, ResponseKey)] =
            names.isEmpty ? [(.response(response), key)] : [(.variants(names), url), (.response(response), key)]
        for (entry, key) in entries {
            try? self.memory?.set(entry, forKey: key, cost: Self.cost(of: entry))
        }
        let tiers = Array(self.shared[sharedTiers ?? self.shared.indices])
        var shared: (@Sendable () async throws(CacheError) -> Void)?
        if !tiers.isEmpty {
            shared = { () async throws(CacheError) in try await Self.write(entries, to: tiers) }
        }
        return Writes(
            disk: { () throws(CacheError) in
                for (entry, key) in entries { try self.write(entry, forKey: key) }
            },
            shared: shared,
            bytes: response.body.count
        )
    }

    /// Writes `entries` to each of `tiers`, going on past a tier that fails.
    ///
    /// - Throws: The last failure, if any tier failed.
    private static func write(
        _ entries: [(StoredEntry, ResponseKey)],
        to tiers: [any AsyncDataCaching]
    ) async throws(CacheError) {
        var failure: CacheError?
        for tier in tiers {
            do throws(CacheError) {
                for (entry, key) in entries {
                    let (data, metadata) = Self.encode(entry)
                    try await tier.set(data, forKey: key.string, metadata: metadata)
                }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// The key a response to `request` is stored under, and the `Vary` names the URL's own key
    /// lists (none if it does not vary).
    func key(
        for response: StoredResponse,
        url: ResponseKey,
        request: HTTPRequest
    ) -> (key: ResponseKey, names: [String]) {
        // The names were read once, with the response's freshness; `Vary: *` is never stored.
        let names = response.facts.varyNames ?? []
        return (names.isEmpty ? url : url.variant(names: names, request: request), names)
    }

    /// Records under `url` that its responses vary on `names`, in memory and on disk.
    func storeVariants(_ names: [String], url: ResponseKey) throws(CacheError) {
        let entry = StoredEntry.variants(names)
        try? self.memory?.set(entry, forKey: url, cost: Self.cost(of: entry))
        try self.write(entry, forKey: url)
    }

    /// The halves of storing a response that come after memory: to the disk tier, which does
    /// not wait, and to the shared tiers (`nil` if it goes to none), which do.
    struct Writes: Sendable {
        let disk: @Sendable () throws(CacheError) -> Void
        let shared: (@Sendable () async throws(CacheError) -> Void)?
        /// The body's size, which the writes hold in memory until they are made.
        let bytes: Int
    }

    /// Removes what is stored under `url` in memory. Variants become unreachable and age out;
    /// so do they with ``removeFromDisk(_:)`` and ``removeShared(_:)``.
    func removeFromMemory(_ url: ResponseKey) {
        _ = self.memory?.removeValue(forKey: url)
    }

    /// Removes what is stored under `url` on disk.
    func removeFromDisk(_ url: ResponseKey) throws(CacheError) {
        try self.disk?.removeValue(forKey: url.string)
    }

    /// Removes what is stored under `url` in every shared tier, going on past a tier that fails.
    ///
    /// - Throws: The last tier's error, if any failed.
    func removeShared(_ url: ResponseKey) async throws(CacheError) {
        var failure: CacheError?
        for tier in self.shared {
            do throws(CacheError) { try await tier.removeValue(forKey: url.string) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    private func entry(_ key: ResponseKey, readsDisk: Bool) throws(CacheError) -> (StoredEntry, StorageTier)? {
        if let entry = self.memory?.value(forKey: key) { return (entry, .memory) }
        guard readsDisk, let disk = self.disk else { return nil }
        let diskKey = key.string
        guard let stored = try disk.entry(forKey: diskKey) else { return nil }
        guard let entry = Self.decode(stored) else {
            // Metadata this version cannot read: the entry is of no use.
            try disk.removeValue(forKey: diskKey)
            return nil
        }
        try? self.memory?.set(entry, forKey: key, cost: Self.cost(of: entry))
        return (entry, .disk)
    }

    private func write(_ entry: StoredEntry, forKey key: ResponseKey) throws(CacheError) {
        guard let disk = self.disk else { return }
        let (data, metadata) = Self.encode(entry)
        try disk.set(data, forKey: key.string, metadata: metadata)
    }

    /// An entry as the bytes and metadata a byte tier keeps: see ``decode(_:)``.
    private static func encode(_ entry: StoredEntry) -> (data: Data, metadata: Data) {
        switch entry {
        case .response(let response): (response.body, response.stored.encoded())
        case .variants(let names): (Data(), Self.variantsMetadata(names))
        }
    }

    private static let variantsMagic = "CHV1\n"

    /// The metadata of a URL's key whose responses vary on `names`: the magic, then the names,
    /// one a line.
    static func variantsMetadata(_ names: [String]) -> Data {
        Data((Self.variantsMagic + names.joined(separator: "\n")).utf8)
    }

    /// What a disk entry's metadata holds: a response (its body the entry's data), or the names
    /// a URL's responses vary on; `nil` if the metadata is neither.
    static func decode(_ entry: DataCacheEntry) -> StoredEntry? {
        let metadata = entry.metadata
        if let response = StoredResponse(decoding: metadata) {
            return .response(CachedResponse(stored: response, body: entry.data))
        }
        guard metadata.starts(with: Self.variantsMagic.utf8) else { return nil }
        let names = String(decoding: metadata.dropFirst(Self.variantsMagic.utf8.count), as: UTF8.self)
        return .variants(names.split(separator: "\n").map(String.init))
    }

    private static func cost(of entry: StoredEntry) -> Int {
        switch entry {
        case .response(let response): response.cost
        case .variants(let names): names.reduce(64) { $0 + $1.utf8.count }
        }
    }
}
