import CCachalotImageCodecs
import Foundation

/// Resizes bitmaps with a separable bicubic filter (Keys' cubic, a = −0.5, the one Pillow's
/// `BICUBIC` uses), widened by the scale factor when shrinking so that every source pixel
/// counts: a box-like average for large reductions, sharp for small ones.
///
/// A reduction by more than 4 in both directions first shrinks by a whole factor with a box
/// filter, leaving at least 2 to the bicubic filter, as Pillow's `thumbnail` does
/// (`reducing_gap` 2): the same picture within a rounding, for a fraction of the work on a
/// large image that was decoded whole.
///
/// Rows are filtered first, then columns, with 8-bit results between the passes, as Pillow does.
/// RGBA with transparency is filtered premultiplied, so that transparent pixels lend no color
/// to their neighbours.
enum Resampler {
    /// `bitmap` resized to `width` × `height` pixels; without `reducing`, by the bicubic filter alone.
    static func resize(_ bitmap: Bitmap, width: Int, height: Int, reducing: Bool = true) -> Bitmap {
        precondition(width > 0 && height > 0, "a bitmap has at least one pixel")
        if width == bitmap.width && height == bitmap.height { return bitmap }
        let premultiplied = bitmap.hasTransparency
        var source = premultiplied ? Self.premultiplying(bitmap) : bitmap
        let factor = Int(min(Double(source.width) / Double(width), Double(source.height) / Double(height)) / 2)
        if reducing, factor >= 2, let reduced = Self.reduced(source, by: factor) { source = reduced }
        let columns = Weights(input: source.width, output: width)
        let rows = Weights(input: source.height, output: height)
        let channels = bitmap.format.bytesPerPixel
        // Rows first: source.height rows of the new width.
        let wide = Bitmap(
            width: width,
            height: source.height,
            format: bitmap.format,
            filling: { out, outRow in
                source.pixels.withUnsafeBytes { raw in
                    let input = raw.bindMemory(to: UInt8.self).baseAddress!
                    if channels == 4 {
                        Self.filterPixels(
                            input,
                            SIMD4<Float>.self,
                            of: source,
                            into: out,
                            outputRowBytes: outRow,
                            columns
                        )
                    } else {
                        Self.filterPixels(input, Float.self, of: source, into: out, outputRowBytes: outRow, columns)
                    }
                }
            }
        )
        // Then columns, a row out at a time: each is a weighted sum of whole rows in, read in order.
        var result = Bitmap(
            width: width,
            height: height,
            format: bitmap.format,
            filling: { out, outRow in
                wide.pixels.withUnsafeBytes { raw in
                    Self.filterRows(
                        raw.bindMemory(to: UInt8.self).baseAddress!,
                        rowBytes: wide.bytesPerRow,
                        into: out,
                        outputRowBytes: outRow,
                        count: width * channels,
                        weights: rows
                    )
                }
            }
        )
        if premultiplied { result = Self.unpremultiplying(result) }
        return result
    }

    /// The filter's taps for each output position along one axis.
    struct Weights {
        /// The first input position each output reads.
        var starts: [Int] = []
        /// How many inputs each output reads.
        var counts: [Int] = []
        /// `taps` weights per output, summing to 1.
        var values: [Float] = []
        let taps: Int

        init(input: Int, output: Int) {
            let scale = Double(input) / Double(output)
            let widening = max(scale, 1)
            let support = 2 * widening
            self.taps = Int(support.rounded(.up)) * 2 + 1
            for position in 0..<output {
                let center = (Double(position) + 0.5) * scale
                let first = max(Int((center - support + 0.5).rounded(.down)), 0)
                let last = min(Int((center + support + 0.5).rounded(.down)), input)
                var weights = (first..<last).map { Self.cubic((Double($0) - center + 0.5) / widening) }
                let total = weights.reduce(0, +)
                if total != 0 { weights = weights.map { $0 / total } }
                self.starts.append(first)
                self.counts.append(weights.count)
                self.values += weights.map(Float.init) + [Float](repeating: 0, count: self.taps - weights.count)
            }
        }

        /// Keys' cubic convolution kernel with a = −0.5.
        static func cubic(_ x: Double) -> Double {
            let a = -0.5
            let x = abs(x)
            if x < 1 { return ((a + 2) * x - (a + 3)) * x * x + 1 }
            if x < 2 { return (((x - 5) * x + 8) * x - 4) * a }
            return 0
        }
    }

    /// Filters each row of `source` along its length: each pixel out is the weighted sum of the
    /// pixels in that `weights` give it. A row is made `Pixel`s of floats once (4 channels a
    /// SIMD4, or 1), so that each tap is one load and one multiply-add.
    private static func filterPixels<Pixel: FilterablePixel>(
        _ input: UnsafePointer<UInt8>,
        _: Pixel.Type,
        of source: Bitmap,
        into output: UnsafeMutablePointer<UInt8>,
        outputRowBytes: Int,
        _ weights: Weights
    ) {
        let row = UnsafeMutablePointer<Pixel>.allocate(capacity: source.width)
        defer { row.deallocate() }
        weights.values.withUnsafeBufferPointer { values in
            weights.starts.withUnsafeBufferPointer { starts in
                weights.counts.withUnsafeBufferPointer { counts in
                    for y in 0..<source.height {
                        let bytes = input + y * source.bytesPerRow
                        for x in 0..<source.width { row[x] = Pixel(bytes + x * Pixel.channels) }
                        let to = output + y * outputRowBytes
                        for position in 0..<starts.count {
                            let taps = values.baseAddress! + position * weights.taps
                            let first = row + starts[position]
                            // Four sums, of every fourth tap, that do not wait on each other.
                            var sums = (Pixel.half, Pixel.zero, Pixel.zero, Pixel.zero)
                            let count = counts[position]
                            var tap = 0
                            while tap + 4 <= count {
                                sums.0.add(first[tap], times: taps[tap])
                                sums.1.add(first[tap + 1], times: taps[tap + 1])
                                sums.2.add(first[tap + 2], times: taps[tap + 2])
                                sums.3.add(first[tap + 3], times: taps[tap + 3])
                                tap += 4
                            }
                            while tap < count {
                                sums.0.add(first[tap], times: taps[tap])
                                tap += 1
                            }
                            sums.0.add(sums.1, times: 1)
                            sums.2.add(sums.3, times: 1)
                            sums.0.add(sums.2, times: 1)
                            sums.0.store(to + position * Pixel.channels)
                        }
                    }
                }
            }
        }
    }

    /// Filters columns of bytes, `rowBytes` apart: each row out is the weighted sum of the rows
    /// in that `weights` give it, `count` bytes of each, summed a whole row at a time so that
    /// memory is read in order and the loop vectorizes.
    private static func filterRows(
        _ input: UnsafePointer<UInt8>,
        rowBytes: Int,
        into output: UnsafeMutablePointer<UInt8>,
        outputRowBytes: Int,
        count: Int,
        weights: Weights
    ) {
        let sums = UnsafeMutablePointer<Float>.allocate(capacity: count)
        defer { sums.deallocate() }
        weights.values.withUnsafeBufferPointer { values in
            for position in 0..<weights.starts.count {
                sums.initialize(repeating: 0.5, count: count)
                for tap in 0..<weights.counts[position] {
                    let weight = values[position * weights.taps + tap]
                    let row = input + (weights.starts[position] + tap) * rowBytes
                    for index in 0..<count { sums[index] += Float(row[index]) * weight }
                }
                let to = output + position * outputRowBytes
                for index in 0..<count { to[index] = UInt8(min(max(sums[index], 0), 255)) }
            }
        }
    }

    /// `bitmap` shrunk by a whole `factor` with a box filter, or `nil` if memory ran out.
    static func reduced(_ bitmap: Bitmap, by factor: Int) -> Bitmap? {
        var reduced = cachalot_pixels()
        let made = bitmap.withPixels { pixels in cachalot_box_reduce(pixels, UInt32(factor), &reduced) }
        return made != 0 ? Bitmap(owning: reduced) : nil
    }

    private static func premultiplying(_ bitmap: Bitmap) -> Bitmap {
        Self.mappingColor(bitmap) { color, alpha in UInt8((Int(color) * Int(alpha) + 127) / 255) }
    }

    private static func unpremultiplying(_ bitmap: Bitmap) -> Bitmap {
        Self.mappingColor(bitmap) { color, alpha in
            alpha == 0 ? 0 : UInt8(min(255, (Int(color) * 255 + Int(alpha) / 2) / Int(alpha)))
        }
    }

    /// `bitmap` (RGBA) with each color channel mapped by its pixel's alpha.
    private static func mappingColor(_ bitmap: Bitmap, _ map: (UInt8, UInt8) -> UInt8) -> Bitmap {
        var pixels = bitmap.pixels
        pixels.withUnsafeMutableBytes { bytes in
            for y in 0..<bitmap.height {
                var offset = y * bitmap.bytesPerRow
                for _ in 0..<bitmap.width {
                    let alpha = bytes[offset + 3]
                    for channel in 0..<3 { bytes[offset + channel] = map(bytes[offset + channel], alpha) }
                    offset += 4
                }
            }
        }
        return Bitmap(
            width: bitmap.width,
            height: bitmap.height,
            format: bitmap.format,
            bytesPerRow: bitmap.bytesPerRow,
            pixels: pixels
        )
    }
}

/// A pixel as floats, for the resampler's row pass: 4 channels or 1.
private protocol FilterablePixel {
    static var channels: Int { get }
    /// Every channel 0.5: a sum's start, so that truncation rounds.
    static var half: Self { get }
    static var zero: Self { get }
    /// The pixel of `channels` bytes at `bytes`.
    init(_ bytes: UnsafePointer<UInt8>)
    mutating func add(_ pixel: Self, times weight: Float)
    /// Writes the channels, clamped to 0...255 and truncated.
    func store(_ bytes: UnsafeMutablePointer<UInt8>)
}

extension SIMD4: FilterablePixel where Scalar == Float {
    fileprivate static var channels: Int { 4 }
    fileprivate static var half: Self { .init(repeating: 0.5) }

    @inline(__always)
    fileprivate init(_ bytes: UnsafePointer<UInt8>) {
        self.init(Float(bytes[0]), Float(bytes[1]), Float(bytes[2]), Float(bytes[3]))
    }

    @inline(__always)
    fileprivate mutating func add(_ pixel: Self, times weight: Float) { self += pixel * weight }

    @inline(__always)
    fileprivate func store(_ bytes: UnsafeMutablePointer<UInt8>) {
        for channel in 0..<4 { bytes[channel] = UInt8(Swift.min(Swift.max(self[channel], 0), 255)) }
    }
}

extension Float: FilterablePixel {
    fileprivate static var channels: Int { 1 }
    fileprivate static var half: Float { 0.5 }

    fileprivate init(_ bytes: UnsafePointer<UInt8>) { self.init(bytes[0]) }

    fileprivate mutating func add(_ pixel: Float, times weight: Float) { self += pixel * weight }

    fileprivate func store(_ bytes: UnsafeMutablePointer<UInt8>) { bytes[0] = UInt8(min(max(self, 0), 255)) }
}
