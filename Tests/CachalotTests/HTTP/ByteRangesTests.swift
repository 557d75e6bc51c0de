import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("ByteRanges: Range requests answered from a whole body (RFC 9110 §14)")
struct ByteRangesTests {
    static let response = Messages.response(
        200,
        [("ETag", "\"v1\""), ("Last-Modified", Messages.date(-1_000)), ("Content-Length", "1000")]
    )

    static func evaluate(
        _ range: String?,
        _ pairs: [(String, String)] = [],
        method: HTTPRequest.Method = .get,
        response: HTTPResponse = Self.response,
        length: Int? = 1_000
    ) -> ByteRanges.Outcome {
        let fields = (range.map { [("Range", $0)] } ?? []) + pairs
        return ByteRanges.evaluate(
            Messages.request("https://example.com/a", method: method, fields),
            response: response,
            length: length
        )
    }

    @Test(
        "first-last, first- and -suffix ranges; last held to the body",
        arguments: [
            ("bytes=0-499", [0..<500]), ("bytes=500-999", [500..<1_000]), ("bytes=500-", [500..<1_000]),
            ("bytes=-300", [700..<1_000]), ("bytes=-5000", [0..<1_000]), ("bytes=990-5000", [990..<1_000]),
            ("bytes=999-999", [999..<1_000]), ("bytes=0-0", [0..<1]), ("BYTES=0-9", [0..<10]),
            ("bytes=0-9, 20-29", [0..<10, 20..<30]), (" bytes=0-9 ,20-29 ", [0..<10, 20..<30]),
            ("bytes=0-9,,20-29", [0..<10, 20..<30]), ("bytes=0-99999999999999999999999", [0..<1_000]),
        ] as [(String, [Range<Int>])]
    )
    func ranges(range: String, expected: [Range<Int>]) {
        #expect(Self.evaluate(range) == .partial(expected))
    }

    @Test(
        "a Range with a syntax error or another unit is ignored",
        arguments: [
            "bytes=", "bytes=abc", "bytes=5-1", "bytes=1-2-3", "bytes=-", "bytes =0-1", "bytes=0 -1",
            "bytes=0-1,x", "bytes=+1-2", "bytes=0x10-", "bytes 0-1", "bytes=0-1;q", "items=0-1", "none", "=0-1",
            "bytes=0-1, 5-1", "",
        ]
    )
    func ignored(range: String) {
        #expect(Self.evaluate(range) == .whole)
    }

    @Test("only a GET, a 200, a known length and one Range line")
    func applicability() {
        #expect(Self.evaluate(nil) == .whole)
        #expect(Self.evaluate("bytes=0-9", method: .head) == .whole)
        #expect(Self.evaluate("bytes=0-9", method: .post) == .whole)
        #expect(Self.evaluate("bytes=0-9", response: Messages.response(206)) == .whole)
        #expect(Self.evaluate("bytes=0-9", response: Messages.response(404)) == .whole)
        #expect(Self.evaluate("bytes=0-9", response: Messages.response(204)) == .whole)
        #expect(Self.evaluate("bytes=0-9", length: nil) == .whole)
        #expect(Self.evaluate("bytes=0-9", [("Range", "bytes=20-29")]) == .whole)
    }

    @Test("unsatisfiable: every range starts at or past the end, or is a suffix of 0")
    func unsatisfiable() {
        #expect(Self.evaluate("bytes=1000-") == .unsatisfiable)
        #expect(Self.evaluate("bytes=1000-2000") == .unsatisfiable)
        #expect(Self.evaluate("bytes=-0") == .unsatisfiable)
        #expect(Self.evaluate("bytes=1000-, -0, 5000-6000") == .unsatisfiable)
        // One satisfiable range is enough; the others are dropped.
        #expect(Self.evaluate("bytes=1000-, 0-9, -0") == .partial([0..<10]))
        // An empty body: unsatisfiable but for a suffix, which it answers whole.
        #expect(Self.evaluate("bytes=0-0", length: 0) == .unsatisfiable)
        #expect(Self.evaluate("bytes=-5", length: 0) == .whole)
        #expect(Self.evaluate("bytes=-0", length: 0) == .unsatisfiable)
    }

    @Test("overlapping and adjacent ranges are coalesced, in ascending order")
    func coalescing() {
        #expect(Self.evaluate("bytes=0-9, 5-19") == .partial([0..<20]))
        #expect(Self.evaluate("bytes=0-9, 10-19") == .partial([0..<20]))
        #expect(Self.evaluate("bytes=0-9, 11-19") == .partial([0..<10, 11..<20]))
        #expect(Self.evaluate("bytes=500-599, 0-9, 100-199") == .partial([0..<10, 100..<200, 500..<600]))
        #expect(Self.evaluate("bytes=-100, 0-9, 950-") == .partial([0..<10, 900..<1_000]))
        #expect(Self.evaluate("bytes=0-0, 0-0, 0-0") == .partial([0..<1]))
        // The whole body in pieces: one range, still partial.
        #expect(Self.evaluate("bytes=0-499, 500-") == .partial([0..<1_000]))
    }

    @Test("more than 64 ranges are ignored")
    func tooMany() {
        let ranges = (0..<65).map { "\($0 * 10)-\($0 * 10 + 1)" }
        #expect(Self.evaluate("bytes=" + ranges.joined(separator: ",")) == .whole)
        let allowed = ranges.dropLast().joined(separator: ",")
        guard case .partial(let result) = Self.evaluate("bytes=" + allowed) else {
            Issue.record("64 ranges are not honored")
            return
        }
        #expect(result.count == 64)
        // Overlapping ones count as asked, before coalescing.
        #expect(Self.evaluate("bytes=" + Array(repeating: "0-1", count: 65).joined(separator: ",")) == .whole)
    }

    @Test("If-Range with an entity tag: a strong match honors the Range, anything else sends the whole")
    func ifRangeTag() {
        #expect(Self.evaluate("bytes=0-9", [("If-Range", "\"v1\"")]) == .partial([0..<10]))
        #expect(Self.evaluate("bytes=0-9", [("If-Range", "\"v2\"")]) == .whole)
        #expect(Self.evaluate("bytes=0-9", [("If-Range", "W/\"v1\"")]) == .whole)
        let weak = Messages.response(200, [("ETag", "W/\"v1\"")])
        #expect(Self.evaluate("bytes=0-9", [("If-Range", "\"v1\"")], response: weak) == .whole)
        #expect(Self.evaluate("bytes=0-9", [("If-Range", "\"v1\"")], response: Messages.response(200)) == .whole)
        #expect(Self.evaluate("bytes=0-9", [("If-Range", "\"v1\", \"v2\"")]) == .whole)
        #expect(Self.evaluate("bytes=0-9", [("If-Range", "\"v1\""), ("If-Range", "\"v1\"")]) == .whole)
    }

    @Test("If-Range with a date: only one equal to a valid Last-Modified honors the Range")
    func ifRangeDate() {
        #expect(Self.evaluate("bytes=0-9", [("If-Range", Messages.date(-1_000))]) == .partial([0..<10]))
        #expect(Self.evaluate("bytes=0-9", [("If-Range", Messages.date(-999))]) == .whole)
        #expect(Self.evaluate("bytes=0-9", [("If-Range", Messages.date(-1_001))]) == .whole)
        #expect(Self.evaluate("bytes=0-9", [("If-Range", "yesterday")]) == .whole)
        let invalid = Messages.response(200, [("Last-Modified", "last week")])
        #expect(Self.evaluate("bytes=0-9", [("If-Range", "last week")], response: invalid) == .whole)
        #expect(
            Self.evaluate("bytes=0-9", [("If-Range", Messages.date(-1_000))], response: Messages.response(200))
                == .whole
        )
    }

    @Test("Content-Range is bytes first-last/length")
    func contentRange() {
        #expect(ByteRanges.contentRange(0..<500, length: 1_234) == "bytes 0-499/1234")
        #expect(ByteRanges.contentRange(999..<1_000, length: 1_000) == "bytes 999-999/1000")
    }
}
