import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a body is written as it arrives: standard output, or a file named with `-o`.
///
/// A regular file (or a name not yet taken) is written whole or not at all: to a new file
/// beside it, whose name no one can guess and which is created with `O_CREAT | O_EXCL |
/// O_NOFOLLOW` (so a link planted at a temporary name redirects nothing), then renamed over the
/// name (a link there is replaced, not followed). Anything else the name leads to (a FIFO, a
/// terminal, `/dev/stdout`, a device, also through a link) is written directly, as curl does:
/// renaming a regular file over a device would replace it.
///
/// The writer holds an `flock` on its new file until it is done. A writer killed meanwhile
/// (`SIGKILL`) leaves the file behind, hidden by its leading dot; the next write to the same name
/// removes such files: those of this naming that no process holds and that nobody has written
/// to for a minute.
final class OutputFile {
    struct WriteError: Error, CustomStringConvertible {
        let description: String
    }

    private let path: String?
    private var descriptor: Int32
    /// The new file to rename over `path` when done; `nil` when writing directly.
    private var temporary: String?

    /// Opens standard output (`path` nil) or the file at `path`; `mode` is for a new file, less
    /// the umask.
    ///
    /// With `replacing`, whatever is at `path` (a device, a FIFO, a link) is replaced by the new
    /// file, never written into: for the tool's own files in the cache directory.
    init(path: String?, mode: mode_t = 0o666, replacing: Bool = false) throws {
        self.path = path
        guard let path else {
            self.descriptor = STDOUT_FILENO
            return
        }
        var status = stat()
        if !replacing, stat(path, &status) == 0, (status.st_mode & S_IFMT) != S_IFREG {
            self.descriptor = open(path, O_WRONLY | O_CLOEXEC)
            guard self.descriptor >= 0 else { throw Self.error(path, errno) }
            return
        }
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        let prefix = ".\(url.lastPathComponent).cachalot-"
        Self.removeLeftovers(startingWith: prefix, in: directory)
        let random = (0..<2).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }.joined()
        let temporary = "\(directory)/\(prefix)\(random)"
        self.descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard self.descriptor >= 0 else { throw Self.error(path, errno) }
        // Held until the descriptor closes, or the process ends however it ends.
        _ = flock(self.descriptor, LOCK_EX | LOCK_NB)
        self.temporary = temporary
    }

    /// How long a file must have gone unwritten before it counts as left behind: a writer takes
    /// its lock just after creating its file, and this covers the moment between.
    static let leftoverAge: TimeInterval = 60

    /// Removes the files in `directory` whose names start with `prefix` (new files of writers to
    /// one name) that were left behind: regular files of this user, not locked by a writer, and
    /// unwritten for ``leftoverAge``. Nothing else is touched, and no link is followed.
    private static func removeLeftovers(startingWith prefix: String, in directory: String) {
        guard let listing = opendir(directory) else { return }
        defer { closedir(listing) }
        let now = Date().timeIntervalSince1970
        while let entry = readdir(listing) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix(prefix) else { continue }
            let path = "\(directory)/\(name)"
            let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard descriptor >= 0 else { continue }
            defer { close(descriptor) }
            var status = stat()
            guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_uid == geteuid(),
                now - TimeInterval(Self.modified(status)) >= Self.leftoverAge,
                flock(descriptor, LOCK_EX | LOCK_NB) == 0
            else { continue }
            unlink(path)
        }
    }

    deinit {
        self.discard()
    }

    /// Writes all of `data`.
    ///
    /// - Throws: ``Failure`` with ``Failure/Status/closedOutput`` if standard output was closed
    ///   by its reader; ``WriteError`` for any other failure.
    func write(_ data: Data) throws {
        guard self.descriptor >= 0 else { throw WriteError(description: "the output was closed already") }
        let failure: Int32 = data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                #if canImport(Glibc)
                let written = Glibc.write(self.descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                #else
                let written = Darwin.write(self.descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                #endif
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += written
            }
            return 0
        }
        guard failure != 0 else { return }
        // SIGPIPE is ignored (see `CachalotCommand.main`), so a reader that went away shows as
        // EPIPE: end as a process killed by SIGPIPE ends in a shell, quietly, with 141.
        if failure == EPIPE { throw Failure(.closedOutput, "") }
        throw Self.error(self.path ?? "standard output", failure)
    }

    /// Finishes the output: a file written beside its name is renamed over it.
    func finish() throws {
        guard self.descriptor >= 0 else { return }
        if self.descriptor != STDOUT_FILENO { close(self.descriptor) }
        self.descriptor = -1
        if let temporary = self.temporary, let path = self.path {
            self.temporary = nil
            guard rename(temporary, path) == 0 else {
                let error = errno
                unlink(temporary)
                throw Self.error(path, error)
            }
        }
    }

    /// Abandons the output: a file being written beside its name is removed, and the name keeps
    /// what it had.
    func discard() {
        if self.descriptor >= 0, self.descriptor != STDOUT_FILENO { close(self.descriptor) }
        self.descriptor = -1
        if let temporary = self.temporary { unlink(temporary) }
        self.temporary = nil
    }

    /// Writes `data` as the whole of the file at `path`.
    static func write(_ data: Data, to path: String, mode: mode_t = 0o666, replacing: Bool = false) throws {
        let file = try OutputFile(path: path, mode: mode, replacing: replacing)
        try file.write(data)
        try file.finish()
    }

    /// Writes `data` to standard output.
    static func standardOutput(_ data: Data) throws {
        try OutputFile(path: nil).write(data)
    }

    /// When the file `status` describes was last written, in seconds since 1970.
    private static func modified(_ status: stat) -> Int {
        #if canImport(Glibc)
        Int(status.st_mtim.tv_sec)
        #else
        Int(status.st_mtimespec.tv_sec)
        #endif
    }

    private static func error(_ path: String, _ number: Int32) -> WriteError {
        WriteError(description: "\(path): \(String(cString: strerror(number)))")
    }
}
