import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a whole input to its end with POSIX calls: a file, or a pipe, a FIFO or a terminal
/// (`/dev/stdin`, `-`), which have no size to ask for.
enum InputFile {
    struct ReadError: Error, CustomStringConvertible {
        let description: String
    }

    /// Everything in the file at `path`, or on standard input when `path` is `nil` or names
    /// standard input itself (`/dev/stdin`): that is read from the descriptor the process has,
    /// since opening a pipe again waits for a writer, and its writer may be gone already.
    static func read(_ path: String?) throws -> Data {
        let path = path.flatMap { Self.isStandardInput($0) ? nil : $0 }
        let descriptor = path.map { open($0, O_RDONLY | O_CLOEXEC) } ?? STDIN_FILENO
        guard descriptor >= 0 else { throw ReadError(description: String(cString: strerror(errno))) }
        defer { if path != nil { close(descriptor) } }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in
                #if canImport(Glibc)
                Glibc.read(descriptor, bytes.baseAddress, bytes.count)
                #else
                Darwin.read(descriptor, bytes.baseAddress, bytes.count)
                #endif
            }
            if count > 0 {
                data.append(contentsOf: buffer[0..<count])
            } else if count == 0 {
                return data
            } else if errno != EINTR {
                throw ReadError(description: String(cString: strerror(errno)))
            }
        }
    }

    /// Whether `path` names the file that standard input is.
    private static func isStandardInput(_ path: String) -> Bool {
        var named = stat()
        var input = stat()
        guard stat(path, &named) == 0, fstat(STDIN_FILENO, &input) == 0 else { return false }
        return named.st_dev == input.st_dev && named.st_ino == input.st_ino
    }
}
