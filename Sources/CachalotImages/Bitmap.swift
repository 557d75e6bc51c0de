import Foundation

/// Decoded pixels, ready to draw: rows of 8-bit channels, top row first.
///
/// Its memory cost is ``cost``, `bytesPerRow × height`: what it holds, which is what the memory
/// tier counts.
public struct Bitmap: Sendable, Hashable {
    /// How a pixel is laid out.
    public enum PixelFormat: Sendable, Hashable {
        /// Red, green, blue and alpha, a byte each; alpha not premultiplied.
        case rgba8
        /// One byte of gray.
        case gray8

        /// The bytes of one pixel.
        public var bytesPerPixel: Int {
            switch self {
            case .rgba8: 4
            case .gray8: 1
            }
        }
    }

    /// The number of pixels in a row; at least 1.
    public let width: Int
    /// The number of rows; at least 1.
    public let height: Int
    /// The bytes from one row's start to the next's: at least `width × bytesPerPixel`.
    public let bytesPerRow: Int
    /// How each pixel is laid out: RGBA or gray, 8 bits a channel.
    public let format: PixelFormat
    /// `bytesPerRow × height` bytes.
    public let pixels: Data

    /// The memory it holds: `bytesPerRow × height`.
    public var cost: Int { self.bytesPerRow * self.height }

    /// Wraps `pixels`, laid out as the other arguments say.
    ///
    /// The pixels are not copied or checked beyond their count.
    ///
    /// - Parameters:
    ///   - width: The pixels in a row.
    ///   - height: The rows.
    ///   - format: How a pixel is laid out.
    ///   - bytesPerRow: The bytes from one row's start to the next's. Default: `nil`, rows packed
    ///     without padding (`width × format.bytesPerPixel`).
    ///   - pixels: The rows, top first, `bytesPerRow × height` bytes.
    /// - Precondition: `width` and `height` are positive, `bytesPerRow` is at least
    ///   `width × bytesPerPixel`, and `pixels` holds `bytesPerRow × height` bytes.
    public init(width: Int, height: Int, format: PixelFormat, bytesPerRow: Int? = nil, pixels: Data) {
        let bytesPerRow = bytesPerRow ?? width * format.bytesPerPixel
        precondition(width > 0 && height > 0, "a bitmap has at least one pixel")
        precondition(bytesPerRow >= width * format.bytesPerPixel, "rows must hold their pixels")
        precondition(pixels.count == bytesPerRow * height, "pixels must hold bytesPerRow × height bytes")
        self.width = width
        self.height = height
        self.bytesPerRow = bytesPerRow
        self.format = format
        self.pixels = pixels
    }

    /// Makes a bitmap by filling a new buffer with `fill`, which gets the buffer and the row
    /// length.
    init(
        width: Int,
        height: Int,
        format: PixelFormat,
        filling fill: (UnsafeMutablePointer<UInt8>, _ bytesPerRow: Int) -> Void
    ) {
        let bytesPerRow = width * format.bytesPerPixel
        var pixels = Data(count: bytesPerRow * height)
        pixels.withUnsafeMutableBytes { buffer in
            fill(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), bytesPerRow)
        }
        self.init(width: width, height: height, format: format, bytesPerRow: bytesPerRow, pixels: pixels)
    }

    /// The channels of the pixel at column `x` and row `y` (4 for RGBA, 1 for gray).
    ///
    /// - Precondition: `x` is in `0..<width` and `y` in `0..<height`.
    public func pixel(x: Int, y: Int) -> [UInt8] {
        precondition((0..<self.width).contains(x) && (0..<self.height).contains(y), "the pixel is outside the bitmap")
        let start = self.pixels.startIndex + y * self.bytesPerRow + x * self.format.bytesPerPixel
        let range: Range<Data.Index> = start..<start + self.format.bytesPerPixel
        return [UInt8](self.pixels[range])
    }

    /// Whether some pixel is not fully opaque. Gray bitmaps have no alpha.
    public var hasTransparency: Bool {
        guard self.format == .rgba8 else { return false }
        return self.pixels.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Bool in
            for y in 0..<self.height {
                var offset = y * self.bytesPerRow + 3
                for _ in 0..<self.width {
                    if bytes[offset] != 255 { return true }
                    offset += 4
                }
            }
            return false
        }
    }
}
