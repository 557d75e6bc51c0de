import Foundation
import HTTPTypes
import Logging

/// The body of a response from the network as it is read: the one reader that stores the
/// response while it passes, writes a large body to a file of the disk tier as it arrives, feeds
/// the readers of a shared response, and collects a whole body for a load.
///
/// A body is kept (in memory up to ``ResourceLoader/Configuration/streamingThreshold``, then in
/// a file) while it is being stored, and, when it is collected, whatever happens to storing. It
/// is stored once its last piece has been read and it is whole, unless it outgrew the largest
/// entry, the rules forbid storing it, or the disk tier failed. Read in pieces, a body that stops
/// being stored is no longer kept: the pieces go on to the reader, and a failure is counted in
/// ``ResourceLoader/Statistics/storageFailures``. Collected, a body the disk tier failed to take
/// goes on in memory, and is stored from there.
struct ResponseBody: AsyncSequence, Sendable {
    let loader: ResourceLoader
    let reply: HTTPTransportResponse
    /// The request as sent, for its method.
    let request: HTTPRequest
    /// What storing the response takes; `nil` for an answer never stored.
    let incoming: ResourceLoader.Incoming?
    /// The response this body is shared through, if any: told of the file the body is written
    /// to, so that readers who fall behind read from it.
    var shared: SharedResponse? = nil

    init(_ reply: HTTPTransportResponse, to request: HTTPRequest, loader: ResourceLoader) {
        self.loader = loader
        self.reply = reply
        self.request = request
        self.incoming = nil
    }

    init(_ incoming: ResourceLoader.Incoming, loader: ResourceLoader) {
        self.loader = loader
        self.reply = incoming.reply
        self.request = incoming.sent
        self.incoming = incoming
    }

    /// The body's announced length; `nil` if unknown, and for the answers that have no body.
    var expectedLength: Int? {
        ResourceLoader.announcedLength(of: self.reply.response, to: self.request)
    }

    /// Whether the response is stored once it has been read whole, as far as its head tells.
    var isStoring: Bool {
        self.incoming?.storage != nil
    }

    func makeAsyncIterator() -> Iterator {
        Iterator(body: self, isCollecting: false, run: nil)
    }

    /// Reads the whole body, telling `progress` how much has arrived after each piece.
    ///
    /// A body larger than the streaming threshold comes back mapped from its file. With `run`,
    /// a response stored in memory is written to the other tiers once the run's callers have
    /// their answer.
    ///
    /// - Throws: ``LoadError``: the body broke off or ended before its `Content-Length`, or the
    ///   file it went to cannot be read back.
    func collect(
        progress: (@Sendable (LoadProgress) -> Void)? = nil,
        run: ResourceLoader.Run? = nil
    ) async throws -> Data {
        var iterator = Iterator(body: self, isCollecting: true, run: run)
        while try await iterator.next() != nil {
            progress?(LoadProgress(received: iterator.received, expected: iterator.expected))
        }
        return iterator.collected
    }

    struct Iterator: AsyncIteratorProtocol {
        let body: ResponseBody
        /// Whether the whole body is kept, for ``ResponseBody/collect(progress:run:)``.
        let isCollecting: Bool
        let run: ResourceLoader.Run?
        var pieces: HTTPBody.AsyncIterator
        let expected: Int?
        var isStoring: Bool
        /// Whether a file may take the body; not after the disk tier failed a collected body.
        var maySpool = true
        var received = 0
        /// The body so far while it is small enough for memory, and the loader's budget allows.
        let held: HeldBytes
        /// The file it goes to once it is not.
        var writer: (any DataCacheWriting)?
        /// The bytes in the writer's file.
        var spooled = 0
        var isFinished = false
        /// The whole body, once a collected body has ended.
        var collected = Data()

        init(body: ResponseBody, isCollecting: Bool, run: ResourceLoader.Run?) {
            self.body = body
            self.isCollecting = isCollecting
            self.run = run
            self.pieces = body.reply.body.makeAsyncIterator()
            self.expected = body.expectedLength
            self.isStoring = body.isStoring
            self.held = HeldBytes(budget: body.loader.bodies)
            if isCollecting, let expected = self.expected, expected > 0 {
                self.held.reserveCapacity(Swift.min(expected, body.loader.configuration.streamingThreshold))
            }
        }

        var isKeeping: Bool {
            self.isStoring || self.isCollecting
        }

        mutating func next() async throws -> Data? {
            guard !self.isFinished else { return nil }
            let piece: Data?
            do {
                piece = try await self.pieces.next()
            } catch {
                await self.stopKeepingOffTheLoop()
                self.isFinished = true
                try Task.checkCancellation()
                throw LoadError(
                    .transport,
                    "The body broke off after \(self.received) bytes: \(error)",
                    underlying: error
                )
            }
            guard let piece else {
                self.isFinished = true
                do {
                    try await self.finish()
                } catch {
                    await self.stopKeepingOffTheLoop()
                    throw error
                }
                return nil
            }
            self.received += piece.count
            self.body.loader.counters.received(piece.count)
            if self.isStoring, self.received > self.body.loader.maximumEntrySize {
                // Outgrown: not stored. A collected body is still kept, in its file.
                if self.isCollecting { self.isStoring = false } else { self.stopKeeping() }
            }
            if self.isKeeping {
                do {
                    // A piece that goes to a file is written where waiting is allowed; one kept in
                    // memory is kept in place.
                    if self.goesToFile(piece) {
                        try await withBlockingAllowed { () throws in try self.keep(piece) }
                    } else {
                        try self.keep(piece)
                    }
                } catch {
                    await self.stopKeepingOffTheLoop()
                    self.isFinished = true
                    throw error
                }
            }
            return piece
        }

        /// Adds `piece` to what is kept: to the file once the body is larger than the streaming
        /// threshold (or announced to be) or the loader holds more than its budget of bodies in
        /// memory, else to memory.
        private mutating func keep(_ piece: Data) throws {
            do throws(CacheError) {
                if self.writer == nil, self.goesToFile(piece) {
                    try self.spool()
                }
                if let writer = self.writer {
                    try writer.append(piece)
                    self.spooled = self.received
                } else {
                    self.held.append(piece)
                }
            } catch {
                let loader = self.body.loader
                loader.counters.storageFailure()
                loader.logger.debug(
                    "Writing a body to the disk tier failed",
                    metadata: ["url": "\(self.body.request.url?.absoluteString ?? "?")", "error": "\(error)"]
                )
                guard self.isCollecting else {
                    self.stopKeeping()
                    return
                }
                // The body goes on in memory, from what reached the file.
                try self.unspool()
                if self.held.count < self.received { self.held.append(piece) }
            }
        }

        /// Whether keeping `piece` writes to a file: the body has one already, or is to have one
        /// now (see ``keep(_:)``).
        private func goesToFile(_ piece: Data) -> Bool {
            if self.writer != nil { return true }
            let threshold = self.body.loader.configuration.streamingThreshold
            return self.held.count + piece.count > threshold || (self.expected ?? 0) > threshold
                || self.body.loader.bodies.isExceeded
        }

        /// Moves what is held to a new file of the disk tier, which takes the rest of the body:
        /// the stored entry's if the response is being stored, else one discarded once read.
        /// Does nothing where there is no such file to be had.
        private mutating func spool() throws(CacheError) {
            guard self.maySpool, let disk = self.body.loader.tiers.streamingDisk, let incoming = self.body.incoming
            else { return }
            let name = self.isStoring ? incoming.storage?.key.string : nil
            let writer = try disk.makeEntryWriter(
                forKey: name ?? "unstored \(UUID())",
                metadata: incoming.stored.encoded()
            )
            self.writer = writer
            if !self.held.isEmpty { try writer.append(self.held.data) }
            self.spooled = self.held.count
            _ = self.held.take()
            if let shared = self.body.shared, let spool = (writer as? any BodySpooling)?.spool() {
                shared.spool(spool)
            }
        }

        /// Takes a collected body back from its file into memory, for good.
        private mutating func unspool() throws {
            self.maySpool = false
            guard let writer = self.writer else { return }
            defer {
                writer.discard()
                self.writer = nil
            }
            do {
                self.held.replace(with: try Data(writer.mappedBody()))
            } catch {
                throw LoadError(.storage, "Reading a body back from the disk tier failed: \(error)", underlying: error)
            }
        }

        /// ``stopKeeping()``, where waiting is allowed if it removes a file.
        private mutating func stopKeepingOffTheLoop() async {
            if self.writer != nil {
                await withBlockingAllowed { self.stopKeeping() }
            } else {
                self.stopKeeping()
            }
        }

        /// Stops keeping the body: what was kept is let go.
        private mutating func stopKeeping() {
            if self.writer != nil { self.body.shared?.spoolStopped(at: self.spooled) }
            self.writer?.discard()
            self.writer = nil
            _ = self.held.take()
            self.isStoring = false
        }

        /// At the end of the body: throws if it is short of its `Content-Length`, else stores
        /// it if it is being stored, and keeps it whole if it is collected.
        private mutating func finish() async throws {
            if let expected = self.expected, self.received < expected {
                throw LoadError(
                    .incompleteBody,
                    "The body ended after \(self.received) of the \(expected) bytes its Content-Length announced."
                )
            }
            let loader = self.body.loader
            let storage = self.isStoring ? self.body.incoming : nil
            if self.writer != nil {
                try await withBlockingAllowed { () throws in try self.finishFile(storage: storage) }
            } else {
                // Out of flight: the memory tier counts what it keeps.
                let body = self.held.take()
                if self.isCollecting { self.collected = body }
                if let storage {
                    let response = CachedResponse(stored: storage.stored, body: body)
                    await loader.tiers.save(
                        response,
                        url: storage.url,
                        request: storage.request,
                        after: self.run?.afterAnswering
                    )
                }
            }
            self.isStoring = false
        }

        /// Ends a body that went to a file: maps it back if it is collected, and makes it the
        /// stored entry if it is stored, else removes it. Waits on the file system.
        private mutating func finishFile(storage: ResourceLoader.Incoming?) throws {
            guard let writer = self.writer else { return }
            if self.isCollecting {
                do {
                    self.collected = try writer.mappedBody()
                } catch {
                    throw LoadError(
                        .storage,
                        "Mapping the body from the disk tier failed: \(error)",
                        underlying: error
                    )
                }
            }
            if let storage, let names = storage.storage?.names, let key = storage.storage?.key {
                self.body.loader.tiers.commit(writer, key: key, variants: names, url: storage.url, size: self.received)
            } else {
                writer.discard()
            }
            self.writer = nil
        }
    }
}
