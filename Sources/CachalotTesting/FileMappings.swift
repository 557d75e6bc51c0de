import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whether bytes lie in a mapping of a file, by `/proc/self/maps` (Linux): then they were
/// mapped, not read into the process's memory.
///
/// ```swift
/// #expect(FileMappings.isMapped(resource.body, fromUnder: directory.path))
/// ```
public enum FileMappings {
    /// Whether `data`'s first byte lies in a mapping of a file whose path starts with `prefix`.
    ///
    /// The kernel writes `/proc/self/maps` a piece per read, so a line can go missing while
    /// other threads map and unmap; a few readings make that unlikely.
    public static func isMapped(_ data: Data, fromUnder prefix: String) -> Bool {
        for _ in 0..<5 where self.isMappedOnce(data, fromUnder: prefix) { return true }
        return false
    }

    private static func isMappedOnce(_ data: Data, fromUnder prefix: String) -> Bool {
        let address = data.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        return Self.readAll("/proc/self/maps").split(separator: "\n").contains { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            let bounds = fields[0].split(separator: "-").compactMap { UInt($0, radix: 16) }
            return bounds.count == 2 && (bounds[0]..<bounds[1]).contains(address) && fields.count >= 6
                && fields[5].hasPrefix(prefix)
        }
    }

    /// The whole of a file read to its end: a /proc file reports size 0, so readers that trust
    /// the size (`String(contentsOfFile:)` among them) can stop early.
    private static func readAll(_ path: String) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return "" }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
