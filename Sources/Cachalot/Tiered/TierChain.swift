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
    /// The shared tier at this index of ``TierChain/shared``.
    case shared(Int)
}

/// The loader's responses in one ordered chain of tiers: memory, over the disk, over the
/// shared tiers that answer after a wait. It knows the keys, the variants and the metadata
/// format, and the order of things: a hit in a tier is promoted to every tier above it; a
/// store reaches memory at once, the disk in the order of the stores, and the shared tiers
/// from tasks of their own; an invalidation or a purge reaches every tier, after the writes
/// queued before it, so that none of them brings back what it removed.
///
/// A tier that fails does not fail the answer: the failure goes to the chain's owner, to count
/// and log.
final class TierChain: Sendable {
    /// What failed in a tier, for the owner to count and log: the answer stands.
    enum Failure: Sendable {
        /// Writing the disk tier (a full disk, say).
        case storing(ResponseKey, CacheError)
        /// Writing a shared tier; `nil` when the write was not even queued, its backlog full.
        case sharedStoring(ResponseKey, CacheError?)
        /// Removing what an unsafe method's answer made outdated.
        case invalidating(ResponseKey, CacheError)
    }

    let memory: MemoryCache<ResponseKey, StoredEntry>?
    let disk: (any DataCaching)?
    /// The tiers below the disk, in order; asked only by ``lookupShared(_:for:failed:)``.
    let shared: [any AsyncDataCaching]
    /// The disk tier, if it can take a body as it arrives.
    let streamingDisk: (any StreamingDataCaching)?
    /// The reads of the shared tiers in flight, shared by identical lookups.
    let sharedReads = ReadFlights<Result<StoredEntry?, CacheError>>()
    /// Responses stored in memory, on their way to disk in the order they were stored.
    let writes: OrderedWrites
    /// Responses on their way to the shared tiers.
    let sharedWrites: SharedWrites
    /// Invalidations and purges, which reads of the shared tiers must not overlap.
    let removals = Removals()
    private let failed: @Sendable (Failure) -> Void

    /// The bytes of bodies waiting for the disk beyond which a store waits for the disk.
    static let largestWriteBacklog = 64 << 20

    /// - Parameters:
    ///   - pending: Counts the writes not yet made.
    ///   - failed: Told what failed in a tier.
    init(
        memory: MemoryCache<ResponseKey, StoredEntry>?,
        disk: (any DataCaching)?,
        shared: [any AsyncDataCaching],
        counting pending: PendingWork,
        failed: @escaping @Sendable (Failure) -> Void
    ) {
        self.memory = memory
        self.disk = disk
        self.streamingDisk = disk as? any StreamingDataCaching
        self.shared = shared
        self.writes = OrderedWrites(counting: pending)
        self.sharedWrites = SharedWrites(counting: pending, largestBacklog: Self.largestWriteBacklog)
        self.failed = failed
    }

    /// The stored response that `request` selects under `url` in the local tiers `reading`,
    /// and where it was.
    func lookup(
        _ url: ResponseKey,
        for request: HTTPRequest,
        reading: LocalTiers = .memoryAndDisk
    ) throws(CacheError) -> Lookup {
        try Self.select(url, for: request) { key throws(CacheError) in try self.entry(key, reading: reading) }
    }

    /// The response that `request` selects under `url` in memory, if memory holds one: a hit
    /// counted only if it does (each key is asked whether it is there first), so that a step
    /// looked at again after it was decided counts no second miss.
    func storedInMemory(_ url: ResponseKey, for request: HTTPRequest) -> CachedResponse? {
        guard let memory = self.memory else { return nil }
        let lookup = Self.select(url, for: request) { key in
            guard memory.contains(key), let entry = memory.value(forKey: key) else { return nil }
            return (entry, StorageTier.memory)
        }
        guard case .found(let response, _) = lookup else { return nil }
        return response
    }

    /// What memory holds for `request` under `url`, looked up without waiting, for a thread
    /// that must never wait (an event loop); `nil` when memory has nothing for it and the disk
    /// may have, which only a lookup that may wait reads. Of the disk it asks only whether the
    /// key's entry is there (``DataCaching/mayContain(_:)``): one open, which fails at a miss.
    func lookupWithoutWaiting(_ url: ResponseKey, for request: HTTPRequest) -> Lookup? {
        var isOnDisk = false
        let lookup = Self.select(url, for: request) { key in
            if let entry = self.memory?.value(forKey: key) { return (entry, StorageTier.memory) }
            isOnDisk = self.disk?.mayContain(key.string) == true
            return nil
        }
        return isOnDisk ? nil : lookup
    }

    /// What `request` selects under `url`, each entry read by `entry`: the URL's response, or
    /// the response of the request's variant if the URL's responses vary.
    private static func select<Failure: Error>(
        _ url: ResponseKey,
        for request: HTTPRequest,
        entry: (ResponseKey) throws(Failure) -> (StoredEntry, StorageTier)?
    ) throws(Failure) -> Lookup {
        guard let (found, tier) = try entry(url) else { return .absent }
        switch found {
        case .response(let response):
            return .found(response, tier)
        case .variants(let names):
            guard let (variant, tier) = try entry(url.variant(names: names, request: request)),
                case .response(let response) = variant
            else { return .otherVariants }
            return .found(response, tier)
        }
    }

    /// The local tiers a lookup reads.
    enum LocalTiers {
        /// The disk alone: for a lookup that memory has answered already.
        case disk
        case memoryAndDisk
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
    /// shared tier), for ``write(_:key:after:)`` to make.
    private func stage(
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
        let tiers = self.shared[sharedTiers ?? self.shared.indices].filter {
            response.body.count <= $0.maximumEntrySize
        }
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
    private func removeFromMemory(_ url: ResponseKey) {
        _ = self.memory?.removeValue(forKey: url)
    }

    /// Removes what is stored under `url` on disk.
    private func removeFromDisk(_ url: ResponseKey) throws(CacheError) {
        try self.disk?.removeValue(forKey: url.string)
    }

    /// Removes what is stored under `url` in every shared tier, going on past a tier that fails.
    ///
    /// - Throws: The last tier's error, if any failed.
    private func removeShared(_ url: ResponseKey) async throws(CacheError) {
        var failure: CacheError?
        for tier in self.shared {
            do throws(CacheError) { try await tier.removeValue(forKey: url.string) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    private func entry(_ key: ResponseKey, reading: LocalTiers) throws(CacheError) -> (StoredEntry, StorageTier)? {
        if reading != .disk, let entry = self.memory?.value(forKey: key) { return (entry, .memory) }
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

    // MARK: - Storing and removing

    /// Stores `response` in memory now, and in the other tiers later (see
    /// ``write(_:key:after:)``).
    ///
    /// - Parameter sharedTiers: The shared tiers it goes to; default: all.
    func save(
        _ response: CachedResponse,
        url: ResponseKey,
        request: HTTPRequest,
        sharedTiers: Range<Int>? = nil,
        after answering: DeferredWork?
    ) async {
        await self.write(
            self.stage(response, url: url, request: request, sharedTiers: sharedTiers),
            key: url,
            after: answering
        )
    }

    /// Makes `later`, the writes that follow memory's: on disk once the callers have their
    /// answer (with `answering`, the work deferred until then; without, from a task of lower
    /// priority), so that a miss does not wait for the disk, unless the disk is
    /// ``largestWriteBacklog`` behind (then the caller makes the writes, or waits, so that the
    /// queue, held in memory, stays bounded) or there is no memory tier (then the response is
    /// on disk before the caller goes on, so that the next load finds it); in the shared tiers
    /// from a task of their own, never waited for. Disk writes are made in the order of this
    /// call.
    private func write(_ later: Writes, key: ResponseKey, after answering: DeferredWork?) async {
        let failed = self.failed
        let ticket = self.writes.enqueue(bytes: later.bytes) {
            do throws(CacheError) { try later.disk() } catch { failed(.storing(key, error)) }
        }
        if let shared = later.shared {
            let isStarted = self.sharedWrites.enqueue(key: key.string, bytes: later.bytes) { () async in
                do throws(CacheError) { try await shared() } catch { failed(.sharedStoring(key, error)) }
            }
            if !isStarted { failed(.sharedStoring(key, nil)) }
        }
        if self.memory == nil {
            await self.drainWrites()
            await self.writes.wait(untilMade: ticket)
        } else if ticket.backlog > Self.largestWriteBacklog {
            await self.drainWrites()
            await self.writes.wait(untilBacklogIsAtMost: Self.largestWriteBacklog)
        } else if let answering {
            answering.add { [writes] in writes.drain() }
        } else {
            Task(priority: .background) { [writes] in writes.drain() }
        }
    }

    /// Makes the writes queued, on this task, where waiting on the disk is allowed.
    private func drainWrites() async {
        await withBlockingAllowed { self.writes.drain() }
    }

    /// Makes a large body written as it arrived into the stored entry under `key` (`url`'s
    /// variant if its responses vary on `names`), then writes it to the shared tiers that take
    /// an entry of its `size`, read back from the disk when the write is made: no body waits in
    /// memory for its turn.
    func commit(_ writer: any DataCacheWriting, key: ResponseKey, variants names: [String], url: ResponseKey, size: Int)
    {
        do throws(CacheError) {
            try writer.commit()
            if !names.isEmpty { try self.storeVariants(names, url: url) }
        } catch {
            self.failed(.storing(url, error))
            return
        }
        let tiers = self.shared.filter { size <= $0.maximumEntrySize }
        guard !tiers.isEmpty, let disk = self.disk else { return }
        let failed = self.failed
        // The body waits on disk, not in memory: it counts nothing against the writes' backlog.
        let isStarted = self.sharedWrites.enqueue(key: url.string, bytes: 0) { () async in
            do throws(CacheError) {
                // Gone, or replaced by an entry of another kind, since: nothing to share.
                guard let stored = try disk.entry(forKey: key.string), let entry = Self.decode(stored),
                    case .response = entry
                else { return }
                let entries = names.isEmpty ? [(entry, key)] : [(.variants(names), url), (entry, key)]
                try await Self.write(entries, to: tiers)
            } catch {
                failed(.sharedStoring(url, error))
            }
        }
        if !isStarted { failed(.sharedStoring(url, nil)) }
    }

    /// Removes what is stored under `key` from every tier, after the writes to them queued
    /// before (so that none of them brings it back later), and returns once it is gone: the
    /// next lookup cannot find what the invalidation made outdated. The shared tiers go
    /// first, so that a load meanwhile cannot bring back from them what memory and disk no
    /// longer hold.
    func invalidate(_ key: ResponseKey) async {
        let failed = self.failed
        await self.removals.run { () async in
            if !self.shared.isEmpty {
                await self.sharedWrites.waitForWrites(to: key.string)
                do throws(CacheError) { try await self.removeShared(key) } catch { failed(.invalidating(key, error)) }
            }
            self.removeFromMemory(key)
            let ticket = self.writes.enqueue(bytes: 0) { [self] in
                do throws(CacheError) { try self.removeFromDisk(key) } catch { failed(.invalidating(key, error)) }
            }
            await self.drainWrites()
            await self.writes.wait(untilMade: ticket)
        }
    }

    /// Removes every entry that `removal` names, in every tier, once the writes queued before
    /// are made.
    func remove(_ removal: CacheRemoval) async throws(CacheError) -> Int {
        try await self.removals.run { () async throws(CacheError) in
            // A write queued before the purge must not land after it and bring back what it removed.
            let ticket = self.writes.enqueue(bytes: 0) {}
            await self.drainWrites()
            await self.writes.wait(untilMade: ticket)
            await self.sharedWrites.waitForWrites(to: nil)
            // The shared tiers first: a load meanwhile cannot bring back from them what memory
            // and disk no longer hold. A tier that fails does not stop the others.
            var removed = 0
            var failure: CacheError?
            for tier in self.shared {
                do throws(CacheError) {
                    removed += try await tier.removeValues(matching: removal)
                } catch {
                    failure = error
                }
            }
            removed += try await withBlockingAllowed { () throws(CacheError) in try self.removeLocal(removal) }
            if let failure { throw failure }
            return removed
        }
    }

    /// Removes every entry that `removal` names in memory and on disk.
    private func removeLocal(_ removal: CacheRemoval) throws(CacheError) -> Int {
        let disk = self.disk as? any EnumerableDataCaching
        guard disk != nil || self.disk == nil else {
            throw .invalidConfiguration(
                "Removing responses by URL or tag needs a disk tier that lists its keys (an EnumerableDataCaching, "
                    + "such as DiskCache); nothing was removed."
            )
        }
        var removed =
            self.memory?.removeValues { key, entry in
                removal.matches(key: key.string) {
                    guard case .response(let response) = entry else { return nil }
                    return response.stored
                }
            } ?? 0
        guard let disk else { return removed }
        for entry in try disk.entries() {
            var failure: CacheError?
            let matches = removal.matches(key: entry.key) {
                do throws(CacheError) {
                    return try disk.metadata(forKey: entry.key).flatMap { StoredResponse(decoding: $0.metadata) }
                } catch {
                    failure = error
                    return nil
                }
            }
            if let failure { throw failure }
            if matches, try disk.removeValue(forKey: entry.key) { removed += 1 }
        }
        return removed
    }
}
