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
                    let input = raw.bindMemory(to: UInt8.self)
                    for y in 0..<source.height {
                        Self.filter(
                            input.baseAddress! + y * source.bytesPerRow,
                            stride: channels,
                            into: out + y * outRow,
                            outputStride: channels,
                            channels: channels,
                            weights: columns
                        )
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

    /// Filters one line of pixels (`stride` bytes apart) into another. The channels of a pixel
    /// are summed together, in one pass over the taps.
    private static func filter(
        _ input: UnsafePointer<UInt8>,
        stride: Int,
        into output: UnsafeMutablePointer<UInt8>,
        outputStride: Int,
        channels: Int,
        weights: Weights
    ) {
        weights.values.withUnsafeBufferPointer { values in
            weights.starts.withUnsafeBufferPointer { starts in
                weights.counts.withUnsafeBufferPointer { counts in
                    for position in 0..<starts.count {
                        let taps = values.baseAddress! + position * weights.taps
                        var source = input + starts[position] * stride
                        let pixel = output + position * outputStride
                        if channels == 4 {
                            var sums: SIMD4<Float> = .init(repeating: 0.5)
                            for tap in 0..<counts[position] {
                                let value = SIMD4<Float>(
                                    Float(source[0]),
                                    Float(source[1]),
                                    Float(source[2]),
                                    Float(source[3])
                                )
                                sums += value * taps[tap]
                                source += stride
                            }
                            let clamped = sums.clamped(lowerBound: .zero, upperBound: .init(repeating: 255))
                            for channel in 0..<4 { pixel[channel] = UInt8(clamped[channel]) }
                        } else {
                            var sum: Float = 0.5
                            for tap in 0..<counts[position] {
                                sum += Float(source[0]) * taps[tap]
                                source += stride
                            }
                            pixel[0] = UInt8(min(max(sum, 0), 255))
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
