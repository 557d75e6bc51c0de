import NIOCore
import Testing

@testable import CachalotServer

@Suite("RequestLineMeter")
struct RequestLineMeterTests {
    @Test("a byte is a token byte exactly when RFC 9110 §5.6.2 makes it a tchar")
    func tokenBytes() {
        let tchars = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(RequestLineMeter.isTokenByte(byte) == tchars.contains(byte), "byte \(byte)")
        }
    }

    /// Connections' bytes, and whether a request line in them is longer than 20 bytes.
    static let connections: [(String, Bool)] = [
        ("GET /a HTTP/1.1\r\nHost: x\r\n\r\n", false),
        ("GET /aaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\nHost: x\r\n\r\n", true),
        // The long one after a short one, its method in the same read as the short one's end.
        ("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true),
        // A field's line is not a request line, however long.
        ("GET /a HTTP/1.1\r\nX-Long: vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\r\n\r\n", false),
        ("GET /a HTTP/1.1\r\nX-Long:vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv", false),
        // Exactly at the limit (20 bytes before the line feed): not over it.
        ("GET /aaaaaaaaaaaaaa\r\nHost: x\r\n\r\n", false),
        ("GET /aaaaaaaaaaaaaaa\r\nHost: x\r\n\r\n", true),
    ]

    @Test(
        "a request line over the limit is seen however the connection's bytes are split into reads",
        arguments: Self.connections.indices
    )
    func longRequestLines(index: Int) {
        let (text, isLong) = Self.connections[index]
        let bytes = Array(text.utf8)
        // In two reads at every point, and in reads of each size.
        var splits = (0...bytes.count).map { [bytes[..<$0], bytes[$0...]] }
        for size in 1...bytes.count {
            splits.append(stride(from: 0, to: bytes.count, by: size).map { bytes[$0..<min($0 + size, bytes.count)] })
        }
        for reads in splits {
            let meter = RequestLineMeter(limit: 20)
            for read in reads where !read.isEmpty { meter.scan(ByteBuffer(bytes: read)) }
            #expect(meter.sawLongRequestLine == isLong, "reads of \(reads.map(\.count))")
        }
    }
}
