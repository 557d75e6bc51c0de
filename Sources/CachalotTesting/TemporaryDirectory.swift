import Foundation

/// A new, empty directory under the system's temporary directory, removed with everything in it
/// when the value is released. Give each test its own.
///
/// ```swift
/// let directory = try TemporaryDirectory()
/// let cache = try DiskCache(directory: directory.url)
/// ```
public final class TemporaryDirectory: Sendable {
    /// The directory's location.
    public let url: URL

    /// Creates the directory.
    ///
    /// - Throws: The error of `FileManager` if the directory cannot be created.
    public init() throws {
        let base = FileManager.default.temporaryDirectory
        self.url = base.appendingPathComponent("cachalot-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: self.url, withIntermediateDirectories: true)
    }

    /// The directory's path.
    public var path: String { self.url.path }

    deinit {
        try? FileManager.default.removeItem(at: self.url)
    }
}
