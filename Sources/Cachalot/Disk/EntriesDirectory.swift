import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The open `entries/` directory, against which gets open entry files by their short relative
/// path, `ab/abcd…`: the kernel then walks two names instead of the whole path.
///
/// If the directory is deleted and made again, the descriptor held still names the old one;
/// ``refreshIfReplaced(_:)`` opens the new one. Replaced descriptors stay open until the cache
/// goes, because a get on another thread may still be using one: closing it could hand its
/// number to an unrelated file.
final class EntriesDirectory: Sendable {
    private let current = Atomic<Int32>(-1)
    private let opened = Mutex<[Int32]>([])

    /// The descriptor of the directory, or -1 before it was first opened.
    var descriptor: Int32 {
        self.current.load(ordering: .acquiring)
    }

    /// Opens the directory at `path` if it is not the one held; returns whether it did.
    func refreshIfReplaced(_ path: String) throws(CacheError) -> Bool {
        try self.opened.withLock { opened throws(CacheError) -> Bool in
            let held = self.current.load(ordering: .relaxed)
            if held >= 0, try FileIO.isFile(held, at: path) { return false }
            guard try FileIO.isDirectory(path) else { return false }
            let fresh = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fresh >= 0 else { throw FileIO.error("open", path, errno) }
            do throws(CacheError) {
                try FileIO.checkTrusted(fresh, path: path)
            } catch {
                FileIO.closeDescriptor(fresh)
                throw error
            }
            opened.append(fresh)
            self.current.store(fresh, ordering: .releasing)
            return true
        }
    }

    deinit {
        self.opened.withLock { opened in
            for descriptor in opened { FileIO.closeDescriptor(descriptor) }
        }
    }
}
