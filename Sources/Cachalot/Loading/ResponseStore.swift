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
enum StorageTier: Sendable {
    case memory, disk
}

/// The loader's responses in the memory tier, over the disk tier: keys, variants, and the
/// metadata format. A disk hit is promoted to memory.
struct ResponseStore: Sendable {
    let memory: MemoryCache<ResponseKey, StoredEntry>?
    let disk: (any DataCaching)?

    /// The stored response that `request` selects under `url`, and where it was.
    func lookup(_ url: ResponseKey, for request: HTTPRequest) throws(CacheError) -> Lookup {
        guard let (entry, tier) = try self.entry(url) else { return .absent }
        switch entry {
        case .response(let response):
            return .found(response, tier)
        case .variants(let names):
            guard let (entry, tier) = try self.entry(url.variant(names: names, request: request)),
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

    /// Stores `response` to `request` under `url`, or under its variant's key if it varies, in
    /// memory at once; returns the write to disk, for the caller to make when it suits.
    func store(_ response: CachedResponse, url: ResponseKey, request: HTTPRequest) -> DiskWrite {
        let (key, names) = self.key(for: response.stored, url: url, request: request)
        let entries: [(StoredEntry, ResponseKey)] =
            names.isEmpty ? [(.response(response), key)] : [(.variants(names), url), (.response(response), key)]
        for (entry, key) in entries {
            try? self.memory?.set(entry, forKey: key, cost: Self.cost(of: entry))
        }
        return DiskWrite { () throws(CacheError) in
            for (entry, key) in entries { try self.write(entry, forKey: key) }
        }
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

    /// The disk half of storing a response.
    struct DiskWrite: Sendable {
        let perform: @Sendable () throws(CacheError) -> Void
    }

    /// Removes what is stored under `url`. Variants become unreachable and age out.
    func remove(_ url: ResponseKey) throws(CacheError) {
        _ = self.memory?.removeValue(forKey: url)
        try self.disk?.removeValue(forKey: url.string)
    }

    private func entry(_ key: ResponseKey) throws(CacheError) -> (StoredEntry, StorageTier)? {
        if let entry = self.memory?.value(forKey: key) { return (entry, .memory) }
        guard let disk = self.disk else { return nil }
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
        switch entry {
        case .response(let response):
            try self.disk?.set(response.body, forKey: key.string, metadata: response.stored.encoded())
        case .variants(let names):
            try self.disk?.set(Data(), forKey: key.string, metadata: Self.variantsMetadata(names))
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
