import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Testing

@testable import CachalotServer

@Suite("ClientHead and the buffers a body is written in")
struct ClientHeadTests {
    @Test(
        "a head as the client gets it: hop-by-hop fields gone, Via, Accept-Ranges, then Age, Date and Cache-Status last"
    )
    func fields() {
        var response = HTTPResponse(status: .ok)
        response.headerFields[.connection] = "x-private"
        response.headerFields[HTTPField.Name("X-Private")!] = "1"
        response.headerFields[HTTPField.Name("Keep-Alive")!] = "timeout=5"
        response.headerFields[.contentLength] = "3"
        response.headerFields[.cacheStatus] = "upstream; hit"
        var head = ClientHead(response, knownLength: true, via: "1.1 cachalot")
        head.finish(age: 7, cacheStatus: .hit("cachalot"))
        let names = head.headers.map(\.name)
        #expect(names == ["Content-Length", "Cache-Status", "Accept-Ranges", "Via", "Age", "Date", "Cache-Status"])
        #expect(head.headers["Via"] == ["1.1 cachalot"])
        #expect(head.headers["Age"] == ["7"])
        #expect(head.headers["Cache-Status"] == ["upstream; hit", "cachalot; hit"])
        #expect(head.hasContentLength)
        let closing = head.nioHead(version: .http1_0, closing: true)
        #expect(closing.headers["Connection"] == ["close"])
        #expect(closing.version == .http1_0)
        #expect(head.nioHead(version: .http1_1, closing: false).headers["Connection"].isEmpty)
    }

    @Test("the origin's Date is kept; none is added twice, and a 206 or a body of unknown length does not take ranges")
    func dateAndRanges() {
        var dated = HTTPResponse(status: .ok)
        dated.headerFields[.date] = "Sun, 06 Nov 1994 08:49:37 GMT"
        var head = ClientHead(dated, knownLength: false, via: "1.1 c")
        head.finish(age: nil, cacheStatus: CacheStatus(name: "c"))
        #expect(head.headers["Date"] == ["Sun, 06 Nov 1994 08:49:37 GMT"])
        #expect(head.headers["Accept-Ranges"].isEmpty)
        #expect(head.headers["Age"].isEmpty)
        #expect(!head.hasContentLength)
        var partial = ClientHead(HTTPResponse(status: .partialContent), knownLength: true, via: "1.1 c")
        partial.finish(age: nil, cacheStatus: CacheStatus(name: "c"))
        #expect(partial.headers["Accept-Ranges"].isEmpty)
        #expect(partial.headers["Date"].count == 1)
    }

    @Test(
        "a body is copied into buffers below the mmap threshold, in order, none empty",
        arguments: [0, 1, 65_536, 65_537, 1_000_000]
    )
    func copies(size: Int) {
        let data = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let buffers = ByteBuffer.copies(of: data[...])
        #expect(buffers.allSatisfy { $0.readableBytes > 0 && $0.readableBytes <= ByteBuffer.largestBodyCopy })
        #expect(buffers.count == (size + ByteBuffer.largestBodyCopy - 1) / ByteBuffer.largestBodyCopy)
        var joined = Data()
        for buffer in buffers { joined.append(contentsOf: buffer.readableBytesView) }
        #expect(joined == data)
        // A slice that does not start at 0.
        let tail = data.dropFirst(size / 3)
        #expect(Data(ByteBuffer.copies(of: tail).flatMap { $0.readableBytesView }) == tail)
    }
}

@Suite("The Date field the proxy adds")
struct DateFieldTests {
    @Test("formatted as an IMF-fixdate once a second: the same second gets the same text, the next second new text")
    func oncePerSecond() {
        let start = Date(timeIntervalSince1970: 784_111_777.25)
        #expect(DateField.text(at: start) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(DateField.text(at: start.addingTimeInterval(0.7)) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(DateField.text(at: start.addingTimeInterval(0.75)) == "Sun, 06 Nov 1994 08:49:38 GMT")
        #expect(DateField.text(at: start.addingTimeInterval(-1)) == "Sun, 06 Nov 1994 08:49:36 GMT")
    }
}

extension CacheStatus {
    /// The member of a hit from the cache named `name`.
    static func hit(_ name: String) -> CacheStatus {
        var status = CacheStatus(name: name)
        status.hit = true
        return status
    }
}
