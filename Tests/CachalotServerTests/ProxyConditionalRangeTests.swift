import AsyncHTTPClient
import Cachalot
import CachalotServer
import CachalotTestOrigin
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Testing

@Suite("The client's own conditional and range requests")
struct ProxyConditionalRangeTests {
    static let body = "0123456789abcdefghijklmnopqrstuvwxyz"

    static func origin() async throws -> TestOrigin {
        try await TestOrigin.start { _ in
            .init(
                fields: [
                    ("Cache-Control", "max-age=60"), ("ETag", "\"v1\""), ("Content-Type", "text/plain"),
                    ("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"),
                ],
                body: Self.body
            )
        }
    }

    @Test("If-None-Match that matches a stored response is answered 304 without asking the origin, in any case")
    func ifNoneMatchFromCache() async throws {
        let origin = try await Self.origin()
        let proxy = try await ProxyHarness(origin: origin)
        _ = try await proxy.send("/c")
        let notModified = try await proxy.send("/c", headers: [("If-None-Match", "W/\"other\", \"v1\"")])
        #expect(notModified.status == 304)
        #expect(notModified.body.isEmpty)
        #expect(notModified.headers["etag"] == ["\"v1\""])
        #expect(notModified.headers["content-type"].isEmpty)
        #expect(notModified.cacheStatus.hasPrefix("cachalot; hit"))
        let changed = try await proxy.send("/c", headers: [("If-None-Match", "\"v0\"")])
        #expect(changed.status == 200)
        #expect(changed.text == Self.body)
        // A field name is a field name in any case.
        #expect(try await proxy.send("/c", headers: [("IF-NONE-MATCH", "\"v1\"")]).status == 304)
        #expect(try await proxy.send("/c", headers: [("range", "bytes=0-1")]).status == 206)
        #expect(origin.requests.count == 1)
        try await proxy.stop()
    }

    @Test("On a miss, the client's validators are not sent on: the 304 goes at once, and the whole response is stored")
    func conditionalMissStoresWhole() async throws {
        let origin = try await Self.origin()
        let proxy = try await ProxyHarness(origin: origin)
        let first = try await proxy.send("/m", headers: [("If-None-Match", "\"v1\"")])
        #expect(first.status == 304)
        #expect(first.cacheStatus == "cachalot; fwd=uri-miss; fwd-status=200; stored")
        #expect(origin.requests.first?.headerFields[.ifNoneMatch] == nil)
        // The body is read into the store after the 304 went, as the loader's background work:
        // until it ends, a request for it joins the flight, collapsed, instead of hitting.
        await proxy.loader.waitForBackgroundWork()
        let whole = try await proxy.send("/m")
        #expect(whole.text == Self.body)
        #expect(whole.cacheStatus.hasPrefix("cachalot; hit"))
        #expect(origin.requests.count == 1)
        // A field name is a field name in any case: neither goes to the origin.
        let other = try await proxy.send("/m2", headers: [("if-NONE-match", "\"v1\""), ("RANGE", "bytes=0-1")])
        #expect(other.status == 304)
        #expect(origin.requests.count == 2)
        #expect(origin.requests.last?.headerFields[.ifNoneMatch] == nil)
        #expect(origin.requests.last?.headerFields[.range] == nil)
        try await proxy.stop()
    }

    @Test("If-Modified-Since counts only without If-None-Match (RFC 9110 §13.2.2)")
    func precedence() async throws {
        let proxy = try await ProxyHarness(origin: try await Self.origin())
        let later = "Mon, 07 Nov 1994 08:49:37 GMT"
        #expect(try await proxy.send("/p", headers: [("If-Modified-Since", later)]).status == 304)
        let both = try await proxy.send("/p", headers: [("If-None-Match", "\"v0\""), ("If-Modified-Since", later)])
        #expect(both.status == 200)
        let failed = try await proxy.send("/p", headers: [("If-Match", "\"v0\"")])
        #expect(failed.status == 412)
        let earlier = "Sat, 05 Nov 1994 08:49:37 GMT"
        #expect(try await proxy.send("/p", headers: [("If-Unmodified-Since", earlier)]).status == 412)
        #expect(try await proxy.send("/p", headers: [("If-Unmodified-Since", later)]).status == 200)
        try await proxy.stop()
    }

    @Test("A single range is answered 206 with Content-Range from a stored response")
    func singleRange() async throws {
        let origin = try await Self.origin()
        let proxy = try await ProxyHarness(origin: origin)
        let miss = try await proxy.send("/r", headers: [("Range", "bytes=2-5")])
        #expect(miss.status == 206)
        #expect(miss.text == "2345")
        #expect(miss.headers["content-range"] == ["bytes 2-5/36"])
        let hit = try await proxy.send("/r", headers: [("Range", "bytes=-3")])
        #expect(hit.status == 206)
        #expect(hit.text == "xyz")
        #expect(hit.cacheStatus.hasPrefix("cachalot; hit"))
        #expect(origin.requests.count == 1)
        #expect(origin.requests.first?.headerFields[.range] == nil)
        let whole = try await proxy.send("/r")
        #expect(whole.headers["accept-ranges"] == ["bytes"])
        try await proxy.stop()
    }

    @Test("Several ranges are answered as multipart/byteranges with a correct length")
    func multipleRanges() async throws {
        let proxy = try await ProxyHarness(origin: try await Self.origin())
        _ = try await proxy.send("/mr")
        let reply = try await proxy.send("/mr", headers: [("Range", "bytes=0-1, 10-12")])
        #expect(reply.status == 206)
        let contentType = try #require(reply.headers["content-type"].first)
        #expect(contentType.hasPrefix("multipart/byteranges; boundary="))
        let boundary = String(contentType.dropFirst("multipart/byteranges; boundary=".count))
        #expect(reply.headers["content-length"] == ["\(reply.body.count)"])
        let expected =
            "--\(boundary)\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/36\r\n\r\n01"
            + "\r\n--\(boundary)\r\nContent-Type: text/plain\r\nContent-Range: bytes 10-12/36\r\n\r\nabc"
            + "\r\n--\(boundary)--\r\n"
        #expect(reply.text == expected)
        try await proxy.stop()
    }

    @Test("A stored body too large to answer at once is answered from its task: whole, in ranges, and to HEAD")
    func largeStoredBody() async throws {
        let body = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=60"), ("ETag", "\"big\"")], data: body)
        }
        let proxy = try await ProxyHarness(origin: origin)
        _ = try await proxy.send("/large")
        let whole = try await proxy.send("/large")
        #expect(whole.cacheStatus.hasPrefix("cachalot; hit"))
        #expect(whole.body == body)
        let ranges = try await proxy.send("/large", headers: [("Range", "bytes=2000000-2000009")])
        #expect(ranges.status == 206)
        #expect(ranges.headers["content-range"] == ["bytes 2000000-2000009/\(body.count)"])
        #expect(ranges.body == body[2_000_000...2_000_009])
        let head = try await proxy.send("/large", method: .HEAD)
        #expect(head.headers["content-length"] == ["\(body.count)"])
        #expect(head.body.isEmpty)
        let notModified = try await proxy.send("/large", headers: [("If-None-Match", "\"big\"")])
        #expect(notModified.status == 304)
        #expect(origin.requests.count == 1)
        try await proxy.stop()
    }

    @Test("An unsatisfiable range gets 416; If-Range with another validator gets the whole 200")
    func unsatisfiableAndIfRange() async throws {
        let proxy = try await ProxyHarness(origin: try await Self.origin())
        _ = try await proxy.send("/u")
        let refused = try await proxy.send("/u", headers: [("Range", "bytes=100-")])
        #expect(refused.status == 416)
        #expect(refused.headers["content-range"] == ["bytes */36"])
        let stale = try await proxy.send("/u", headers: [("Range", "bytes=0-1"), ("If-Range", "\"v0\"")])
        #expect(stale.status == 200)
        #expect(stale.text == Self.body)
        let current = try await proxy.send("/u", headers: [("Range", "bytes=0-1"), ("If-Range", "\"v1\"")])
        #expect(current.status == 206)
        #expect(current.text == "01")
        try await proxy.stop()
    }
}
