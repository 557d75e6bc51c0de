import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The part of a progressive JPEG that a decode at 1/8 needs: all but the AC scans it ignores.
///
/// At 1/8, libjpeg makes each pixel from one block's DC coefficient. A component subsampled
/// 2 × 2 (the chroma of most photos) is the exception: libjpeg-turbo scales it up by a 2 × 2
/// inverse DCT rather than by upsampling, which also reads three AC coefficients. A progressive
/// JPEG sends the DC coefficients of every block in scans of their own, and the AC coefficients
/// of each component in others, which make up most of the file; libjpeg decodes every scan it
/// is given. So a decode at 1/8 is given a copy without the AC scans of the components that
/// need only DC: the same pixels (tested), with most of the entropy decoding left out. Finding
/// where a scan ends is a search for the next marker, not a decoding.
enum JPEGScans {
    /// `jpeg` without its AC scans, or `nil` if it is not a whole progressive Huffman-coded JPEG
    /// (start to end marker) whose markers this reading follows. Such data is decoded as it is,
    /// so that libjpeg reports its faults as usual.
    static func withoutACScans(_ jpeg: Data) -> Data? {
        jpeg.withUnsafeBytes { Self.withoutACScans($0) }
    }

    private static func withoutACScans(_ bytes: UnsafeRawBufferPointer) -> Data? {
        guard bytes.count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return nil }
        var kept = Data([0xFF, 0xD8])
        var position = 2
        var isProgressive = false
        var keptScans = 0
        // The components whose AC coefficients a decode at 1/8 reads, by identifier.
        var readsAC = Set<UInt8>()
        while true {
            // A marker: 0xFF, any number of fill bytes 0xFF, then its code.
            guard position < bytes.count, bytes[position] == 0xFF else { return nil }
            while position < bytes.count, bytes[position] == 0xFF { position += 1 }
            guard position < bytes.count else { return nil }
            let code = bytes[position]
            let markerStart = position - 1
            position += 1
            switch code {
            case 0xD9:  // end of image
                guard isProgressive, keptScans > 0 else { return nil }
                kept.append(contentsOf: [0xFF, 0xD9])
                return kept
            case 0x00, 0x01, 0xD0...0xD8:  // markers without a segment have no place here
                return nil
            default:
                break
            }
            guard position + 2 <= bytes.count else { return nil }
            let length = Int(bytes[position]) << 8 | Int(bytes[position + 1])
            guard length >= 2, length <= bytes.count - position else { return nil }
            let segment = UnsafeRawBufferPointer(rebasing: bytes[markerStart..<position + length])
            position += length
            switch code {
            case 0xC2:  // progressive, Huffman-coded
                guard let components = Self.componentsReadingAC(frame: segment) else { return nil }
                isProgressive = true
                readsAC = components
                kept.append(contentsOf: segment)
            case 0xC0...0xCF where code != 0xC4 && code != 0xC8 && code != 0xCC:
                return nil  // any other kind of frame: nothing to leave out
            case 0xDA:  // start of scan: its components, then its first and last coefficient
                guard isProgressive, segment.count >= 5, let end = Self.endOfScan(bytes, from: position) else {
                    return nil
                }
                let components = (0..<Int(segment[4])).map { 5 + 2 * $0 }
                let firstCoefficient = 5 + 2 * components.count
                guard firstCoefficient < segment.count else { return nil }
                // DC scans (first or refining), and AC scans of the components that need them.
                if segment[firstCoefficient] == 0 || components.contains(where: { readsAC.contains(segment[$0]) }) {
                    kept.append(contentsOf: segment)
                    kept.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[position..<end]))
                    keptScans += 1
                }
                position = end
            default:  // tables, restart interval, application data, comments
                kept.append(contentsOf: segment)
            }
        }
    }

    /// The identifiers of the components that libjpeg-turbo decodes at 1/8 with more than their
    /// DC coefficient, from the frame header `frame` (marker included): those it scales up by
    /// the inverse DCT, as it does with components subsampled in both directions. `nil` if the
    /// header is malformed.
    private static func componentsReadingAC(frame: UnsafeRawBufferPointer) -> Set<UInt8>? {
        // Marker (2), length (2), precision (1), height (2), width (2), count (1), then 3 bytes
        // a component: identifier, sampling factors (horizontal, vertical), quantization table.
        guard frame.count >= 10 else { return nil }
        let components = (0..<Int(frame[9])).map { 10 + 3 * $0 }
        guard let last = components.last, last + 3 <= frame.count else { return nil }
        let factors = components.map { (Int(frame[$0 + 1] >> 4), Int(frame[$0 + 1] & 0x0F)) }
        guard factors.allSatisfy({ (1...4).contains($0.0) && (1...4).contains($0.1) }) else { return nil }
        let (largestH, largestV) = (factors.map(\.0).max()!, factors.map(\.1).max()!)
        var identifiers = Set<UInt8>()
        for (offset, (h, v)) in zip(components, factors) {
            // libjpeg-turbo's choice (jdmaster.c): the scaled block size doubles from 1 while it
            // divides the largest sampling factors as the component's own do, twice.
            var size = 1
            while size < 8, largestH % (h * size * 2) == 0, largestV % (v * size * 2) == 0 { size *= 2 }
            if size > 1 { identifiers.insert(frame[offset]) }
        }
        return identifiers
    }

    /// Where the entropy-coded data that starts at `start` ends: at the first 0xFF that is not
    /// a stuffed byte (0xFF 0x00) or a restart marker (0xFF 0xD0–0xD7); `nil` if the data ends
    /// first.
    private static func endOfScan(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        var index = start
        while index < bytes.count - 1 {
            guard let found = memchr(bytes.baseAddress! + index, 0xFF, bytes.count - 1 - index) else { return nil }
            let offset = bytes.baseAddress!.distance(to: UnsafeRawPointer(found))
            let next = bytes[offset + 1]
            if next != 0x00 && !(0xD0...0xD7).contains(next) { return offset }
            index = offset + 2
        }
        return nil
    }
}
