import Cachalot
import Foundation
import HTTPTypes

/// A 206 (Partial Content) made from a whole response as its body passes: one range as the
/// body itself, several as `multipart/byteranges` (RFC 9110 §14.6).
struct PartialContent: Sendable {
    /// The ranges, ascending, none overlapping (as `ByteRanges.evaluate(_:response:length:)`
    /// gives them).
    let ranges: [Range<Int>]
    /// The whole body's length.
    let length: Int
    /// The boundary between parts, when there are several.
    let boundary: String
    /// The whole response's `Content-Type`, repeated in each part.
    let contentType: String?

    init(ranges: [Range<Int>], length: Int, contentType: String?) {
        self.ranges = ranges
        self.length = length
        self.contentType = contentType
        self.boundary = "cachalot-" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    }

    private var isMultipart: Bool { self.ranges.count > 1 }

    /// The 206's head, made from the whole response's.
    func response(from whole: HTTPResponse) -> HTTPResponse {
        var response = whole
        response.status = .partialContent
        if self.isMultipart {
            response.headerFields[.contentType] = "multipart/byteranges; boundary=\(self.boundary)"
            response.headerFields[.contentRange] = nil
        } else if let range = self.ranges.first {
            response.headerFields[.contentRange] = ByteRanges.contentRange(range, length: self.length)
        }
        response.headerFields[.contentLength] = String(self.bodyLength)
        return response
    }

    /// The 206's body length: the ranges, and around them the parts' heads and the closing line.
    var bodyLength: Int {
        guard self.isMultipart else { return self.ranges.first?.count ?? 0 }
        return self.ranges.indices.reduce(self.closing.utf8.count) { total, index in
            total + self.partHead(index).utf8.count + self.ranges[index].count
        }
    }

    /// What comes before part `index`'s bytes.
    func partHead(_ index: Int) -> String {
        var head = (index == 0 ? "" : "\r\n") + "--\(self.boundary)\r\n"
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        head += "Content-Range: \(ByteRanges.contentRange(self.ranges[index], length: self.length))\r\n\r\n"
        return head
    }

    /// What ends a multipart body.
    var closing: String { "\r\n--\(self.boundary)--\r\n" }

    /// Writes the parts of `body` (the whole body, read once) with `write`; reads `body` to its end.
    func relay(_ body: HTTPBody, write: (Data) async throws -> Void) async throws {
        var cutter = Cutter(self)
        for try await piece in body {
            for part in cutter.cut(piece) { try await write(part) }
        }
        for part in cutter.end() { try await write(part) }
    }

    /// The 206's body, cut from `whole`, the whole body in hand.
    func body(of whole: Data) -> [Data] {
        var cutter = Cutter(self)
        return cutter.cut(whole) + cutter.end()
    }

    /// Cuts the 206's body from the whole body's pieces, in order, as they pass.
    private struct Cutter {
        let content: PartialContent
        /// Where the next piece starts in the whole body.
        var offset = 0
        /// The next range to cut.
        var index = 0
        /// Whether the part of range `index` has its head written.
        var isPartOpen = false

        init(_ content: PartialContent) {
            self.content = content
        }

        /// What of `piece`, the whole body's next bytes, the 206 carries.
        mutating func cut(_ piece: Data) -> [Data] {
            var parts: [Data] = []
            let ranges = self.content.ranges
            let end = self.offset + piece.count
            while self.index < ranges.count, ranges[self.index].lowerBound < end {
                let range = ranges[self.index]
                if self.content.isMultipart && !self.isPartOpen {
                    parts.append(Data(self.content.partHead(self.index).utf8))
                    self.isPartOpen = true
                }
                let (low, high) = (max(range.lowerBound, self.offset), min(range.upperBound, end))
                if low < high {
                    parts.append(
                        piece[(piece.startIndex + low - self.offset)..<(piece.startIndex + high - self.offset)]
                    )
                }
                guard range.upperBound <= end else { break }
                self.index += 1
                self.isPartOpen = false
            }
            self.offset = end
            return parts
        }

        /// What ends the 206's body once the whole body has passed.
        func end() -> [Data] {
            self.content.isMultipart ? [Data(self.content.closing.utf8)] : []
        }
    }
}
