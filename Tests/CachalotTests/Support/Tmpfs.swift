import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A small tmpfs mounted for a test: a real full or read-only disk. Mounting needs root (CI
/// runs as root). Its root is private to its owner (mode 0700), as a cache directory must be.
struct Tmpfs {
    /// Where it is mounted.
    let path: String

    struct Failed: Error {
        let command: [String]
    }

    /// Mounts a tmpfs of `size` (as mount(8) reads it: `512k`, `2m`) at `path`, making the
    /// directory if it is missing.
    init(at path: String, size: String) throws {
        mkdir(path, 0o700)
        self.path = path
        try Self.run(["mount", "-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", path])
    }

    /// Makes the file system read-only, with everything on it.
    func remountReadOnly() throws {
        try Self.run(["mount", "-o", "remount,ro", self.path])
    }

    /// Fills the file system to the last byte with a file of its own.
    func fill() throws {
        let descriptor = open(self.path + "/filler", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failed(command: ["open", self.path + "/filler"]) }
        defer { close(descriptor) }
        let block = [UInt8](repeating: 0, count: 4_096)
        while write(descriptor, block, block.count) > 0 {}
        while write(descriptor, block, 1) > 0 {}
        guard errno == ENOSPC else { throw Failed(command: ["write", self.path + "/filler"]) }
    }

    func unmount() {
        _ = try? Self.run(["umount", self.path])
    }

    /// Unmounts it; `false` if it could not be, as when a file on it is still open.
    func tryUnmount() -> Bool {
        (try? Self.run(["umount", self.path])) != nil
    }

    /// Runs a command of a few milliseconds to its end.
    private static func run(_ command: [String]) throws {
        let status = try ChildProcess.start(command[0], Array(command.dropFirst())).waitForExit().status
        guard status == 0 else { throw Failed(command: command) }
    }
}
