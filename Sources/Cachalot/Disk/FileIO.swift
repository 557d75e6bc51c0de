import CCachalotCore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Thin wrappers over the POSIX calls the disk tier makes, throwing ``CacheError``s that carry
/// the path, the error number and advice.
///
/// The disk tier uses POSIX calls rather than `FileManager` or `Data.write(to:)`: on Linux the
/// latter fsyncs on every write, and listing a directory with `FileManager` costs about 40 µs
/// an entry (see FACTS.md in the project's shared notes).
enum FileIO {
    /// Opens `relativePath` in the open `directory` for reading, following no symbolic link in
    /// any of its components and never leaving `directory`; `nil` if there is no such file (or
    /// a link is on the way). `path` names the file in errors. The open never waits: a FIFO
    /// in the file's place is opened without waiting for a writer (`O_NONBLOCK`), and a read
    /// finds it is no regular file.
    static func openForReading(
        _ relativePath: UnsafePointer<CChar>,
        in directory: Int32,
        path: @autoclosure () -> String
    ) throws(CacheError) -> Int32? {
        let descriptor = cachalot_open_beneath(directory, relativePath, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0)
        if descriptor >= 0 { return descriptor }
        let error = errno
        // ELOOP: a symbolic link on the way, which the cache never follows; EXDEV: out of the
        // directory; EACCES: a file or subdirectory another user (root) left, which this user
        // cannot read, and which a set replaces.
        if error == ENOENT || error == ENOTDIR || error == ELOOP || error == EXDEV || error == EACCES { return nil }
        throw Self.error("open", path(), error)
    }

    /// Opens the directory `relativePath` in the open `directory` as `openForReading` opens a
    /// file; `nil` if there is none, or a symbolic link or a file is in its place.
    static func openDirectory(
        _ relativePath: String,
        in directory: Int32,
        path: @autoclosure () -> String
    ) throws(CacheError) -> Int32? {
        let descriptor = cachalot_open_beneath(directory, relativePath, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)
        if descriptor >= 0 { return descriptor }
        let error = errno
        if error == ENOENT || error == ENOTDIR || error == ELOOP || error == EXDEV { return nil }
        throw Self.error("open", path(), error)
    }

    /// Opens the directory at `path`, which must not be a symbolic link.
    static func openDirectory(atPath path: String) throws(CacheError) -> Int32 {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { throw Self.error("open", path, errno) }
        return descriptor
    }

    /// A new descriptor of what `descriptor` refers to, closed on `exec` as every descriptor
    /// the disk tier opens is (`dup` makes one that is not: a child process started by another
    /// thread meanwhile would hold the file, and its file system, open for its whole life);
    /// -1 with `errno` set if there is none.
    static func duplicate(_ descriptor: Int32) -> Int32 {
        fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
    }

    /// The names in the open `directory`, without "." and "..".
    static func names(in directory: Int32, path: @autoclosure () -> String) throws(CacheError) -> [String] {
        let copy = Self.duplicate(directory)
        guard copy >= 0, let stream = fdopendir(copy) else {
            let error = errno
            if copy >= 0 { _ = close(copy) }
            throw Self.error("list", path(), error)
        }
        defer { closedir(stream) }
        // A descriptor shares its position with its duplicate: list from the start.
        rewinddir(stream)
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Removes `name` in the open `directory`: a file, a symbolic link (never what it points
    /// to), or a directory with what it holds (one planted where a file belongs), its links
    /// never followed. A missing name is not an error. Returns whether it removed something.
    ///
    /// - Throws: ``CacheError`` with the errno of the first thing that could not be removed
    ///   (`EACCES` for another user's, `ELOOP` for directories nested more than
    ///   ``largestRemovedDepth`` deep); what could be removed is gone.
    @discardableResult
    static func removeFile(
        named name: String,
        in directory: Int32,
        path: @autoclosure () -> String
    ) throws(CacheError) -> Bool {
        try Self.removeFile(named: name, in: directory, path: path(), depth: 0)
    }

    /// How deep ``removeFile(named:in:path:)`` goes into a directory planted in the cache.
    static let largestRemovedDepth = 32

    private static func removeFile(
        named name: String,
        in directory: Int32,
        path: String,
        depth: Int
    ) throws(CacheError) -> Bool {
        if unlinkat(directory, name, 0) == 0 { return true }
        let error = errno
        if error == ENOENT { return false }
        // A directory where a file belongs: EISDIR on Linux, EPERM on Darwin.
        guard error == EISDIR || error == EPERM else { throw Self.error("remove", path, error) }
        if unlinkat(directory, name, AT_REMOVEDIR) == 0 { return true }
        guard errno == ENOTEMPTY || errno == EEXIST else { throw Self.error("remove", path, errno) }
        guard depth < Self.largestRemovedDepth else { throw Self.error("remove", path, ELOOP) }
        let inner = openat(directory, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard inner >= 0 else { throw Self.error("remove", path, errno) }
        defer { Self.closeDescriptor(inner) }
        for child in try Self.names(in: inner, path: path) {
            _ = try Self.removeFile(named: child, in: inner, path: "\(path)/\(child)", depth: depth + 1)
        }
        guard unlinkat(directory, name, AT_REMOVEDIR) == 0 || errno == ENOENT else {
            throw Self.error("remove", path, errno)
        }
        return true
    }

    /// The size of the open file, and whether it is a regular file.
    static func size(
        of descriptor: Int32,
        path: @autoclosure () -> String
    ) throws(CacheError) -> (size: Int, isRegular: Bool) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw Self.error("stat", path(), errno) }
        return (Int(status.st_size), (status.st_mode & S_IFMT) == S_IFREG)
    }

    /// Reads exactly `count` bytes at `offset` into `buffer`; returns how many were there (fewer
    /// only at the end of the file).
    static func readFully(
        _ descriptor: Int32,
        into buffer: UnsafeMutableRawBufferPointer,
        at offset: Int,
        path: @autoclosure () -> String
    ) throws(CacheError) -> Int {
        var done = 0
        while done < buffer.count {
            let result = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if result > 0 {
                done += result
            } else if result == 0 {
                break
            } else if errno != EINTR {
                throw Self.error("read", path(), errno)
            }
        }
        return done
    }

    /// Reads the start of the file into `buffer` with one `pread`, which for a regular file
    /// comes back short only at the end of the file; returns how many bytes were read, or `nil`
    /// if the descriptor is a directory's or a FIFO's.
    static func readStart(
        _ descriptor: Int32,
        into buffer: UnsafeMutableRawBufferPointer,
        path: @autoclosure () -> String
    ) throws(CacheError) -> Int? {
        while true {
            let result = pread(descriptor, buffer.baseAddress!, buffer.count, 0)
            if result >= 0 { return result }
            let error = errno
            // A directory or a FIFO (ESPIPE) in an entry's place: no entry.
            if error == EISDIR || error == ESPIPE { return nil }
            if error != EINTR { throw Self.error("read", path(), error) }
        }
    }

    /// Writes all of `bytes` at `offset`, or at the file's current position when it is `nil`.
    static func writeAll(
        _ descriptor: Int32,
        _ bytes: UnsafeRawBufferPointer,
        at offset: Int?,
        path: String
    ) throws(CacheError) {
        var done = 0
        while done < bytes.count {
            let start = bytes.baseAddress! + done
            let result =
                if let offset {
                    pwrite(descriptor, start, bytes.count - done, off_t(offset + done))
                } else {
                    write(descriptor, start, bytes.count - done)
                }
            if result >= 0 {
                done += result
            } else if errno != EINTR {
                throw Self.error("write", path, errno)
            }
        }
    }

    /// Reads up to `bytes.count` bytes at `offset` into `bytes`; returns how many were there.
    static func readFully(
        _ descriptor: Int32,
        into bytes: inout [UInt8],
        at offset: Int,
        path: String
    ) throws(CacheError) -> Int {
        var failure: CacheError?
        let count = bytes.withUnsafeMutableBytes { buffer in
            do throws(CacheError) { return try Self.readFully(descriptor, into: buffer, at: offset, path: path) } catch
            {
                failure = error
                return 0
            }
        }
        if let failure { throw failure }
        return count
    }

    /// Writes all of `bytes` at `offset`, or at the file's current position when `offset` is nil.
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8], at offset: Int?, path: String) throws(CacheError) {
        var failure: CacheError?
        bytes.withUnsafeBytes { buffer in
            do throws(CacheError) { try Self.writeAll(descriptor, buffer, at: offset, path: path) } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// Writes all of `first`, then all of `second`, at the file's current position: in one
    /// `writev` when the kernel takes both whole, as it does for a regular file with room.
    static func writeAll(_ descriptor: Int32, _ first: [UInt8], _ second: Data, path: String) throws(CacheError) {
        var failure: CacheError?
        first.withUnsafeBytes { first in
            second.withUnsafeBytes { second in
                do throws(CacheError) { try Self.writeAll(descriptor, first, second, path: path) } catch {
                    failure = error
                }
            }
        }
        if let failure { throw failure }
    }

    private static func writeAll(
        _ descriptor: Int32,
        _ first: UnsafeRawBufferPointer,
        _ second: UnsafeRawBufferPointer,
        path: String
    ) throws(CacheError) {
        var vectors = [
            iovec(iov_base: UnsafeMutableRawPointer(mutating: first.baseAddress), iov_len: first.count),
            iovec(iov_base: UnsafeMutableRawPointer(mutating: second.baseAddress), iov_len: second.count),
        ]
        var written = 0
        // Until `first` is written whole: what is left of both, in one call; then what is left of
        // `second` alone, as any other write.
        while written < first.count {
            vectors[0].iov_base = UnsafeMutableRawPointer(mutating: first.baseAddress! + written)
            vectors[0].iov_len = first.count - written
            let result = writev(descriptor, vectors, 2)
            if result >= 0 {
                written += result
            } else if errno != EINTR {
                throw Self.error("write", path, errno)
            }
        }
        let rest = written - first.count
        try Self.writeAll(descriptor, UnsafeRawBufferPointer(rebasing: second[rest...]), at: nil, path: path)
    }

    /// Writes all of `data` at the file's current position.
    static func writeAll(_ descriptor: Int32, _ data: Data, path: String) throws(CacheError) {
        var failure: CacheError?
        data.withUnsafeBytes { bytes in
            do throws(CacheError) { try Self.writeAll(descriptor, bytes, at: nil, path: path) } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// Creates a new file, which must not exist, readable and writable by the owner only.
    static func create(_ path: String) throws(CacheError) -> Int32 {
        // Readable too, so that a streaming write can map what it wrote.
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Self.error("create", path, errno) }
        return descriptor
    }

    /// Maps the first `count` bytes of the open file, read-only; the caller unmaps them.
    static func map(_ descriptor: Int32, count: Int, path: String) throws(CacheError) -> UnsafeRawBufferPointer {
        guard let base = mmap(nil, count, PROT_READ, MAP_SHARED, descriptor, 0), base != MAP_FAILED else {
            throw Self.error("map", path, errno)
        }
        return UnsafeRawBufferPointer(start: base, count: count)
    }

    /// Maps `count` bytes of the open file from its start, read-only; `body` gets the bytes from
    /// `offset` as `Data` that unmaps them when it goes.
    static func mapped(_ descriptor: Int32, count: Int, from offset: Int, path: String) throws(CacheError) -> Data {
        guard count > offset else { return Data() }
        let base = UnsafeMutableRawPointer(mutating: try Self.map(descriptor, count: count, path: path).baseAddress!)
        return Data(
            bytesNoCopy: base + offset,
            count: count - offset,
            deallocator: .custom { _, _ in munmap(base, count) }
        )
    }

    /// Opens (creating if needed) a file for reading and writing, without following a link, or,
    /// where this user may not write it (a read-only file system or cache), for reading only;
    /// returns why it could not be written (`EROFS` or `EACCES`), or 0 if it can be.
    static func openForUpdateOrReading(_ path: String) throws(CacheError) -> (descriptor: Int32, writeError: Int32) {
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if descriptor >= 0 { return (descriptor, 0) }
        let error = errno
        if error == EACCES || error == EROFS {
            let reading = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            if reading >= 0 { return (reading, error) }
        }
        throw Self.error("open", path, error)
    }

    static func closeDescriptor(_ descriptor: Int32) {
        _ = close(descriptor)
    }

    /// Renames `source` to `destination`, replacing it atomically.
    static func move(_ source: String, to destination: String) throws(CacheError) {
        guard rename(source, destination) == 0 else { throw Self.error("rename", destination, errno) }
    }

    /// Removes `path`; a missing file is not an error. Returns whether a file was removed.
    @discardableResult
    static func removeFile(_ path: String) throws(CacheError) -> Bool {
        if unlink(path) == 0 { return true }
        let error = errno
        if error == ENOENT { return false }
        // A directory where a file belongs (EISDIR on Linux, EPERM on Darwin): remove it if empty.
        if error == EISDIR || error == EPERM, rmdir(path) == 0 { return true }
        throw Self.error("remove", path, error)
    }

    static func truncate(_ descriptor: Int32, to size: Int, path: String) throws(CacheError) {
        guard ftruncate(descriptor, off_t(size)) == 0 else { throw Self.error("truncate", path, errno) }
    }

    static func synchronize(_ descriptor: Int32, path: String) throws(CacheError) {
        guard fsync(descriptor) == 0 else { throw Self.error("sync", path, errno) }
    }

    /// Makes a rename or removal in `directory` durable.
    static func synchronizeDirectory(_ directory: String) throws(CacheError) {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Self.error("open", directory, errno) }
        defer { Self.closeDescriptor(descriptor) }
        try Self.synchronize(descriptor, path: directory)
    }

    /// Creates `path` as a directory readable by the owner only, unless it is one already.
    /// A symbolic link or a file in its place is an error.
    static func makeDirectory(_ path: String) throws(CacheError) {
        var made = mkdir(path, 0o700) == 0
        if !made && errno == ENOENT {
            // The parent is missing: create it first, then try this one once more (a parent that
            // exists yet refuses, as /proc does, must not send this round again).
            let parent = (path as NSString).deletingLastPathComponent
            guard !parent.isEmpty, parent != path else { throw Self.error("create directory", path, ENOENT) }
            try Self.makeDirectory(parent)
            made = mkdir(path, 0o700) == 0
        }
        if made { return }
        let error = errno
        guard error == EEXIST else { throw Self.error("create directory", path, error) }
        var status = stat()
        guard lstat(path, &status) == 0 else { throw Self.error("stat", path, errno) }
        guard (status.st_mode & S_IFMT) == S_IFDIR else {
            throw CacheError(
                .fileSystem,
                "\(path) exists but is not a directory (the cache never follows symbolic links); "
                    + "remove it or choose another cache directory.",
                path: path,
                errno: ENOTDIR
            )
        }
    }

    /// The allocation unit of the file system that holds `path`: the fragment size `statvfs`
    /// reports, if it is a block size from 512 bytes to 64 KiB; else 4096. (Network file systems
    /// report their transfer size there, up to megabytes, which is no unit of space.)
    static func allocationUnit(of path: String) -> Int {
        var status = statvfs()
        guard statvfs(path, &status) == 0 else { return 4_096 }
        let unit = Int(status.f_frsize > 0 ? status.f_frsize : status.f_bsize)
        return (512...65_536).contains(unit) ? unit : 4_096
    }

    /// Checks that the open directory `descriptor` can be trusted with the cache: it belongs to
    /// the user running this process (or to root, who can change anything anyway) and no other
    /// user can write in it. Anyone who could would choose what the cache serves, by swapping
    /// its files.
    static func checkTrusted(_ descriptor: Int32, path: String) throws(CacheError) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw Self.error("stat", path, errno) }
        try Self.checkTrusted(status, path: path)
    }

    /// ``checkTrusted(_:path:)`` of what `stat` said of `path`.
    static func checkTrusted(_ status: stat, path: String) throws(CacheError) {
        let user = geteuid()
        if status.st_uid != user && status.st_uid != 0 {
            throw CacheError(
                .fileSystem,
                "\(path) belongs to \(Self.userName(status.st_uid)), not to \(Self.userName(user)) who runs this "
                    + "process: its owner could change what the cache serves. Use a cache directory of your own, or "
                    + "run as its owner.",
                path: path,
                errno: EPERM
            )
        }
        if status.st_mode & (S_IWGRP | S_IWOTH) != 0 {
            let mode = (status.st_mode & S_IFMT) == S_IFDIR ? "700" : "600"
            throw CacheError(
                .fileSystem,
                "\(path) can be written by other users (mode \(String(status.st_mode & 0o7777, radix: 8))): they "
                    + "could change what the cache serves. Make it private with `chmod \(mode) \(path)`, or choose "
                    + "another cache directory.",
                path: path,
                errno: EPERM
            )
        }
    }

    /// `name (uid N)`, or `uid N` for a user the system does not name.
    private static func userName(_ user: uid_t) -> String {
        guard let entry = getpwuid(user), let name = entry.pointee.pw_name else { return "uid \(user)" }
        return "\(String(cString: name)) (uid \(user))"
    }

    /// Whether `path` is a directory itself, not a symbolic link to one; `false` if it does not
    /// exist.
    static func isDirectory(_ path: String) throws(CacheError) -> Bool {
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT { return false }
            throw Self.error("stat", path, errno)
        }
        return (status.st_mode & S_IFMT) == S_IFDIR
    }

    /// Whether the open file `descriptor` is the file at `path` (not a symbolic link to it).
    static func isFile(_ descriptor: Int32, at path: String) throws(CacheError) -> Bool {
        var open = stat()
        var named = stat()
        guard fstat(descriptor, &open) == 0 else { throw Self.error("stat", path, errno) }
        guard lstat(path, &named) == 0 else {
            if errno == ENOENT { return false }
            throw Self.error("stat", path, errno)
        }
        return open.st_dev == named.st_dev && open.st_ino == named.st_ino
    }

    /// Takes an exclusive advisory lock on the open file, waiting for other holders; the lock
    /// goes when the descriptor is closed or the process ends, however it ends.
    static func lockExclusively(_ descriptor: Int32, path: String) throws(CacheError) {
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw Self.error("lock", path, errno) }
        }
    }

    static func unlock(_ descriptor: Int32) {
        _ = flock(descriptor, LOCK_UN)
    }

    /// A ``CacheError`` for a failed call, with advice that fits the error number.
    static func error(_ operation: String, _ path: String, _ number: Int32) -> CacheError {
        let reason = String(cString: strerror(number))
        switch number {
        case ENOSPC, EDQUOT:
            return CacheError(
                .outOfSpace,
                "Could not \(operation) \(path): \(reason). Free some disk space or lower the cache's size limit.",
                path: path,
                errno: number
            )
        case EACCES, EPERM, EROFS:
            return CacheError(
                .fileSystem,
                "Could not \(operation) \(path): \(reason). Make the cache directory writable by this user, "
                    + "or choose another one.",
                path: path,
                errno: number
            )
        default:
            return CacheError(.fileSystem, "Could not \(operation) \(path): \(reason).", path: path, errno: number)
        }
    }
}
