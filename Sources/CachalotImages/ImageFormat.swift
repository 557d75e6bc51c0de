import Foundation

/// An image format, told by the data's first bytes, never by a file name or a Content-Type.
public enum ImageFormat: Sendable, Hashable {
    case png
    case jpeg

    /// The format whose signature `data` starts with, or `nil`.
    public init?(sniffing data: Data) {
        if data.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            self = .png
        } else if data.starts(with: [0xFF, 0xD8, 0xFF]) {
            self = .jpeg
        } else {
            return nil
        }
    }
}
