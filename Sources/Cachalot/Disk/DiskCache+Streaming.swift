import Foundation

extension DiskCache {
    /// Writes one entry in pieces, for a body too large to hold in memory at once.
    ///
    /// ```swift
    /// let writer = try cache.makeWriter(forKey: url, metadata: head)
    /// for try await chunk in response.body { try writer.append(chunk) }
    /// try writer.commit()
    /// ```
    ///
    /// Nothing is visible to readers until ``commit()``. A writer that is discarded, released
    /// without committing, or fails, leaves nothing behind, and the entry stored before for the
    /// key stays as it was.
    public final class Writer {
        private let cache: DiskCache
        private let key: String
        private let metadata: Data
        private let created: Int64
        private let prefixLength: Int
        private let path: String
        /// Open until the writer commits or is discarded.
        private var descriptor: Int32?
        /// Of the body appended so far.
        private var checksum = BodyChecksum()
        /// Whether a write failed, after which the writer can only be mapped or discarded.
        private var hasFailed = false

        /// The body bytes appended so far.
        public private(set) var bodyLength = 0

        init(cache: DiskCache, key: String, metadata: Data) throws(CacheError) {
            self.cache = cache
            self.key = key
            self.metadata = metadata
            self.created = cache.store.nanoseconds(cache.store.now())
            let (descriptor, path) = try cache.store.createTemporaryFile()
            self.descriptor = descriptor
            self.path = path
            // A header that says "no body" until the commit writes the real length.
            let prefix = EntryFile.prefix(
                key: key,
                metadata: metadata,
                bodyLength: 0,
                bodyChecksum: BodyChecksum().value,
                created: self.created
            )
            self.prefixLength = prefix.count
            do {
                try FileIO.writeAll(descriptor, prefix, at: nil, path: path)
            } catch {
                self.discard()
                throw error
            }
        }

        deinit {
            self.discard()
        }

        /// A reader of what this writer writes, from a descriptor of its own: it reads the bytes
        /// appended so far, and goes on reading them after a commit renames the file or a
        /// discard removes it. `nil` once the writer is committed or discarded, or if no
        /// descriptor is left.
        func spool() -> BodySpool? {
            guard let descriptor = self.descriptor else { return nil }
            let copy = FileIO.duplicate(descriptor)
            guard copy >= 0 else { return nil }
            return BodySpool(descriptor: copy, path: self.path, bodyStart: self.prefixLength)
        }

        /// Appends `chunk` to the body.
        ///
        /// - Throws: ``CacheError`` if the write fails (``CacheError/Code/outOfSpace`` on a full
        ///   disk), or if the writer was committed or discarded already. After a failed write,
        ///   ``mappedBody()`` still maps the chunks appended before it; commit no more, and
        ///   discard the writer.
        public func append(_ chunk: Data) throws(CacheError) {
            guard let descriptor = self.descriptor else {
                throw .invalidArgument("This writer was already committed or discarded; make a new one.")
            }
            guard !self.hasFailed else {
                throw .invalidArgument("A write of this writer failed; discard it and make a new one.")
            }
            do {
                try FileIO.writeAll(descriptor, chunk, path: self.path)
            } catch {
                self.hasFailed = true
                throw error
            }
            self.bodyLength += chunk.count
            self.checksum.update(chunk)
        }

        /// Makes the entry visible: completes its header, renames it into place, and evicts
        /// until the limits hold. An entry larger than the size limit is discarded instead, and
        /// the entry stored before for the key is removed.
        ///
        /// - Throws: ``CacheError/Code/invalidArgument`` if the writer was already committed or
        ///   discarded, or one of its writes failed (the file is then removed); ``CacheError``
        ///   (code `outOfSpace` or `fileSystem`) if the file cannot be completed, renamed or
        ///   recorded, in which case the temporary file is removed and the previous entry stays.
        public func commit() throws(CacheError) {
            guard let descriptor = self.descriptor, !self.hasFailed else {
                self.discard()
                throw .invalidArgument("This writer was already committed or discarded, or a write failed.")
            }
            let digest = KeyDigest(key: self.key)
            let size = self.prefixLength + self.bodyLength
            guard self.cache.fitsInLimit(size) else {
                self.discard()
                try self.cache.removeValue(forKey: self.key)
                return
            }
            let prefix = EntryFile.prefix(
                key: self.key,
                metadata: self.metadata,
                bodyLength: self.bodyLength,
                bodyChecksum: self.checksum.value,
                created: self.created
            )
            do throws(CacheError) {
                try FileIO.writeAll(descriptor, prefix, at: 0, path: self.path)
                if self.cache.configuration.isDurable { try FileIO.synchronize(descriptor, path: self.path) }
            } catch {
                self.discard()
                throw error
            }
            FileIO.closeDescriptor(descriptor)
            self.descriptor = nil
            try self.cache.commit(self.path, digest: digest, key: self.key, size: size, created: self.created)
        }

        /// The body written so far, mapped from the file rather than read into memory. The
        /// mapping stays valid after a commit or a discard: the cache never changes a file in
        /// place, it replaces or unlinks it.
        ///
        /// - Throws: ``CacheError`` if the writer was committed or discarded, or mapping failed.
        public func mappedBody() throws(CacheError) -> Data {
            guard let descriptor = self.descriptor else {
                throw .invalidArgument("This writer was already committed or discarded; map before that.")
            }
            return try FileIO.mapped(
                descriptor,
                count: self.prefixLength + self.bodyLength,
                from: self.prefixLength,
                path: self.path
            )
        }

        /// Abandons the entry and removes what was written; does nothing after a commit.
        public func discard() {
            guard let descriptor = self.descriptor else { return }
            FileIO.closeDescriptor(descriptor)
            self.descriptor = nil
            _ = try? FileIO.removeFile(self.path)
        }
    }

    /// Reads one entry's body in pieces from its open file, so a large body is never in memory
    /// whole. The reader keeps the file it opened: if the entry is replaced or removed meanwhile,
    /// it goes on reading the entry as it was when opened.
    ///
    /// The body is verified against its checksum as it is read, so damage is known only at the
    /// end: the read that reaches it throws instead of returning the last piece, and the entry is
    /// removed. A caller that passes pieces on before the end must treat that error as a body
    /// that broke off.
    public final class BodyReader {
        /// The key of the entry.
        public let key: String
        /// The metadata stored with it.
        public let metadata: Data
        /// When it was stored.
        public let created: Date
        /// The length of the whole body.
        public let bodyLength: Int

        private let cache: DiskCache
        private let descriptor: Int32
        private let path: String
        private var offset: Int
        private let end: Int
        private let expectedChecksum: UInt32
        private var checksum = BodyChecksum()

        init(cache: DiskCache, descriptor: Int32, path: String, contents: EntryFile.Contents, bodyLength: Int) {
            self.cache = cache
            self.descriptor = descriptor
            self.path = path
            self.expectedChecksum = contents.bodyChecksum
            self.key = contents.key
            self.metadata = contents.metadata
            self.created = DiskStore.date(contents.created)
            self.bodyLength = bodyLength
            self.end = contents.fileSize
            self.offset = contents.fileSize - bodyLength
        }

        deinit {
            FileIO.closeDescriptor(self.descriptor)
        }

        /// The next piece of the body, at most `maximumCount` bytes, or `nil` at the end.
        ///
        /// - Parameter maximumCount: The most bytes to return. Default: 64 KiB.
        ///
        /// - Throws: ``CacheError`` if the file cannot be read, was cut short under the reader
        ///   (which only something outside the cache could do), or its body does not match its
        ///   checksum (``CacheError/Code/corrupted``, from the read that reaches the end).
        public func read(upTo maximumCount: Int = 64 << 10) throws(CacheError) -> Data? {
            let count = min(maximumCount, self.end - self.offset)
            guard count > 0 else { return nil }
            var bytes = [UInt8](repeating: 0, count: count)
            let read = try FileIO.readFully(self.descriptor, into: &bytes, at: self.offset, path: self.path)
            guard read == count else {
                throw CacheError(
                    .fileSystem,
                    "The entry file \(self.path) was cut short while it was read; read the entry again.",
                    path: self.path
                )
            }
            self.offset += count
            bytes.withUnsafeBytes { self.checksum.update($0) }
            if self.offset == self.end, self.checksum.value != self.expectedChecksum {
                try? self.cache.removeIfInvalid(KeyDigest(key: self.key))
                throw CacheError(
                    .corrupted,
                    "The body of \(self.path) does not match its checksum; the entry was removed.",
                    path: self.path
                )
            }
            return Data(bytes)
        }
    }

    /// Starts a streaming write of the entry for `key`; see ``Writer``.
    ///
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - metadata: Stored with the body. Default: empty.
    /// - Throws: ``CacheError`` if the temporary file cannot be made or its header written (code
    ///   `outOfSpace` on a full disk, `fileSystem` otherwise, including on a read-only cache).
    public func makeWriter(forKey key: String, metadata: Data = Data()) throws(CacheError) -> Writer {
        try Writer(cache: self, key: key, metadata: metadata)
    }

    /// Opens the entry for `key` for reading its body in pieces, or returns `nil` if there is no
    /// whole entry; see ``BodyReader``. Opening counts as a use of the entry. A damaged or
    /// expired entry is removed, and `nil` returned.
    ///
    /// - Throws: ``CacheError`` if the entry's file exists but cannot be opened or read.
    public func bodyReader(forKey key: String) throws(CacheError) -> BodyReader? {
        let digest = KeyDigest(key: key)
        let path = self.store.path(of: digest)
        guard let descriptor = try self.store.openEntry(digest) else { return nil }
        let reading: EntryFile.Reading
        do {
            reading = try EntryFile.readPrefix(descriptor, path: path)
        } catch {
            FileIO.closeDescriptor(descriptor)
            throw error
        }
        guard case .valid(let contents) = reading, contents.key == key else {
            FileIO.closeDescriptor(descriptor)
            try? self.removeIfInvalid(digest)
            return nil
        }
        let now = self.store.nanoseconds(self.store.now())
        if self.store.isExpired(created: contents.created, now: now) {
            FileIO.closeDescriptor(descriptor)
            try? self.remove([digest])
            return nil
        }
        let bodyLength = contents.fileSize - EntryFile.headerSize - contents.key.utf8.count - contents.metadata.count
        try self.noteAccess(digest, at: now)
        return BodyReader(cache: self, descriptor: descriptor, path: path, contents: contents, bodyLength: bodyLength)
    }
}

/// A writer whose body can be read back as it is written.
protocol BodySpooling {
    /// A reader of the body written so far and from now on; `nil` if there is none.
    func spool() -> BodySpool?
}

extension DiskCache.Writer: BodySpooling {}

/// The body a ``DiskCache/Writer`` is writing, read back by readers that fell behind what is held
/// in memory for them (see `SharedResponse`). It owns a descriptor of its own, closed when it is
/// released.
final class BodySpool: Sendable {
    private let descriptor: Int32
    private let path: String
    private let bodyStart: Int

    init(descriptor: Int32, path: String, bodyStart: Int) {
        self.descriptor = descriptor
        self.path = path
        self.bodyStart = bodyStart
    }

    deinit {
        FileIO.closeDescriptor(self.descriptor)
    }

    /// Up to `count` bytes of the body from `offset`; fewer only where the file ends.
    ///
    /// - Throws: ``CacheError`` if the file cannot be read.
    func read(at offset: Int, count: Int) throws(CacheError) -> Data {
        var bytes = [UInt8](repeating: 0, count: count)
        let read = try FileIO.readFully(self.descriptor, into: &bytes, at: self.bodyStart + offset, path: self.path)
        return Data(bytes[..<read])
    }
}
