import Cachalot
import CachalotTestOrigin
import CachalotTesting
import Dispatch
import Foundation
import NIOCore
import Synchronization
import Testing

@testable import CachalotServer

/// Collects what an access log writes.
final class AccessLogOutput: Sendable {
    private let bytes = Mutex<[UInt8]>([])

    /// An access log in `format` that writes here.
    func accessLog(_ format: AccessLog.Format, bufferSize: Int = 1 << 20) -> AccessLog {
        AccessLog(format: format, bufferSize: bufferSize) { lines in self.bytes.withLock { $0 += lines } }
    }

    /// The lines written, without their newlines.
    var lines: [String] {
        String(decoding: self.bytes.withLock { $0 }, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}

@Suite("The access log")
struct AccessLogTests {
    /// A line with nothing to escape, of a known size.
    static let plainRecord = AccessLogRecord(
        time: 0,
        client: nil,
        method: "GET",
        target: "/",
        status: 200,
        bytes: 0,
        microseconds: 0,
        cacheStatus: "c"
    )

    @Test("JSON lines parse, with the client's address, and the text format has it too; lines are flushed at shutdown")
    func formats() async throws {
        for format in [AccessLog.Format.json, .text] {
            let origin = try await TestOrigin.start { _ in
                .init(fields: [("Cache-Control", "max-age=60")], body: "hi")
            }
            let output = AccessLogOutput()
            let proxy = try await ProxyHarness(origin: origin) { $0.accessLog = output.accessLog(format) }
            // A miss, answered by the connection's task, then a hit, answered on the event loop.
            let miss = try await proxy.send("/a?q=%22x%22")
            let hit = try await proxy.send("/a?q=%22x%22")
            #expect(miss.status == 200)
            #expect(hit.status == 200)
            try await proxy.stop()
            let lines = output.lines
            #expect(lines.count == 2, "\(lines)")
            for (index, line) in lines.enumerated() {
                if format == .json {
                    let object = try #require(
                        try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                        "\(line)"
                    )
                    #expect(object["client"] as? String == "127.0.0.1")
                    #expect(object["method"] as? String == "GET")
                    #expect(object["target"] as? String == "/a?q=%22x%22")
                    #expect(object["status"] as? Int == 200)
                    #expect(object["bytes"] as? Int == 2)
                    #expect(object["ms"] is Double || object["ms"] is Int)
                    #expect((object["time"] as? String)?.hasSuffix("Z") == true)
                    let cache = try #require(object["cache"] as? String)
                    #expect(index == 0 ? cache.contains("fwd=uri-miss") : cache.contains("; hit"))
                } else {
                    let pattern =
                        /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z 127\.0\.0\.1 GET \/a\?q=%22x%22 200 bytes=2 ms=\d+\.\d{3} cache=(.+)/
                    let cache = try #require(line.wholeMatch(of: pattern)?.output.1, "\(line)")
                    #expect(index == 0 ? cache.contains("fwd=uri-miss") : cache.contains("; hit"))
                }
            }
        }
    }

    @Test("Every forwarded response is logged, also when its client closes the connection as soon as it has it")
    func missesOfClientsThatLeave() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "no-store")], body: "hi") }
        defer { origin.stop() }
        let output = AccessLogOutput()
        let proxy = try await ProxyHarness(origin: origin) { $0.accessLog = output.accessLog(.text) }
        for index in 0..<20 {
            // The client closes as soon as it has read the answer, as curl does when it exits.
            let received = try await RawClient.withConnection(port: proxy.port) { inbound, outbound in
                try await outbound.write(ByteBuffer(string: "GET /m\(index) HTTP/1.1\r\nHost: x\r\n\r\n"))
                return try await RawClient.readResponse(&inbound)
            }
            #expect(RawClient.statuses(in: received) == [200])
        }
        try await proxy.stop()
        #expect(output.lines.count == 20, "\(output.lines)")
    }

    @Test("Strings are escaped: a JSON line parses back to what was logged, and a text line stays one line")
    func escaping() throws {
        let record = AccessLogRecord(
            time: 0,
            client: nil,
            method: "GET",
            target: "/a\"b\\c\u{1}d\ne é",
            status: 200,
            bytes: 0,
            microseconds: 1_234,
            cacheStatus: "cachalot; hit"
        )
        var json: [UInt8] = []
        AccessLogWriter.append(record, as: .json, to: &json)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any]
        )
        #expect(object["target"] as? String == record.target)
        #expect(object["client"] is NSNull)
        #expect(object["ms"] as? Double == 1.234)
        #expect(object["time"] as? String == "1970-01-01T00:00:00.000Z")
        var text: [UInt8] = []
        AccessLogWriter.append(record, as: .text, to: &text)
        let line = String(decoding: text, as: UTF8.self)
        let target = #"/a"b\x5cc\x01d\x0ae\x20é"#
        #expect(line == "1970-01-01T00:00:00.000Z - GET \(target) 200 bytes=0 ms=1.234 cache=cachalot; hit\n")
        // Under a millisecond, the milliseconds keep their three decimals.
        var quick = record
        quick.microseconds = 5
        var quickText: [UInt8] = []
        AccessLogWriter.append(quick, as: .text, to: &quickText)
        #expect(String(decoding: quickText, as: UTF8.self).contains(" ms=0.005 "))
    }

    @Test("Each line's time is its own, to the millisecond, whether the line before it was in the same second or not")
    func lineTimes() {
        var clock = LineClock()
        let times = [1_800_000_000.25, 1_800_000_000.75, 1_800_000_001, 1_799_999_999.5, 951_782_400.125]
        let bytes = [UInt8](unsafeUninitializedCapacity: 32 * times.count) { buffer, count in
            var writer = ByteWriter(buffer)
            for time in times {
                clock.write(time, into: &writer)
                writer.write("\n")
            }
            count = writer.count
        }
        #expect(
            String(decoding: bytes, as: UTF8.self).split(separator: "\n") == [
                "2027-01-15T08:00:00.250Z", "2027-01-15T08:00:00.750Z", "2027-01-15T08:00:01.000Z",
                "2027-01-15T07:59:59.500Z", "2000-02-29T00:00:00.125Z",
            ]
        )
        let numbers = [UInt8](unsafeUninitializedCapacity: 64) { buffer, count in
            var writer = ByteWriter(buffer)
            for (value, digits) in [(0, 1), (7, 3), (1_234, 1), (1_234, 6), (-42, 1), (Int.min, 1)] {
                writer.write(decimal: value, digits: digits)
                writer.write(" ")
            }
            count = writer.count
        }
        #expect(String(decoding: numbers, as: UTF8.self) == "0 007 1234 001234 -42 \(Int.min) ")
    }

    @Test("A line whose strings are nothing but bytes to escape fits the room counted for it, in either format")
    func longestLines() throws {
        let everyByte = String(decoding: (0..<128).map { UInt8($0) }, as: UTF8.self)
        let record = AccessLogRecord(
            time: 253_402_300_800,  // 10000-01-01: a fifth digit in the year
            client: "[2001:db8::1]",
            method: "\u{1}\u{2}",
            target: everyByte,
            status: Int.min,
            bytes: Int.max,
            microseconds: Int64.min,
            cacheStatus: everyByte
        )
        var json: [UInt8] = []
        AccessLogWriter.append(record, as: .json, to: &json)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any])
        #expect(object["target"] as? String == everyByte)
        #expect(object["cache"] as? String == everyByte)
        #expect(object["time"] as? String == "10000-01-01T00:00:00.000Z")
        var text: [UInt8] = []
        AccessLogWriter.append(record, as: .text, to: &text)
        #expect(text.filter { $0 == UInt8(ascii: "\n") }.count == 1)
        #expect(String(decoding: text, as: UTF8.self).hasPrefix("10000-01-01T00:00:00.000Z [2001:db8::1] \\x01\\x02 "))
    }

    @Test("Lines past the buffer's bound are dropped and counted, not waited for; the rest are written at the end")
    func dropsWhenFull() async throws {
        let output = AccessLogOutput()
        let dropped = Mutex(0)
        let record = Self.plainRecord
        // Room for three lines; the thread is not started, so nothing leaves the buffer meanwhile.
        let writer = AccessLogWriter(
            output.accessLog(.text, bufferSize: record.size * 3),
            logger: LogRecorder().logger()
        ) { count in dropped.withLock { $0 += count } }
        for _ in 0..<10 { writer.append(record) }
        writer.start()
        await writer.finish()
        #expect(output.lines.count == 3)
        #expect(dropped.withLock { $0 } == 7)
    }

    #if os(Linux)
    @Test("The writer's thread has a name of its own, as top and perf show it (Linux keeps 15 bytes of it)")
    func threadName() async throws {
        let names = Mutex<[String]>([])
        let log = AccessLog(format: .text) { _ in
            let name = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)
            names.withLock { $0.append(name ?? "?") }
        }
        let writer = AccessLogWriter(log, logger: LogRecorder().logger())
        writer.append(Self.plainRecord)
        writer.start()
        await writer.finish()
        #expect(names.withLock { $0 } == ["access-log\n"])
    }
    #endif

    @Test("An output that blocks holds up no response")
    func blockedOutput() async throws {
        let origin = try await TestOrigin.start { _ in .init(fields: [("Cache-Control", "max-age=60")], body: "hi") }
        let release = DispatchSemaphore(value: 0)
        let proxy = try await ProxyHarness(origin: origin) {
            $0.accessLog = AccessLog(format: .text, bufferSize: 1_024) { _ in release.wait() }
        }
        // The writer's thread is stuck in its output; every request is answered all the same.
        for _ in 0..<50 {
            let reply = try await proxy.send("/a")
            #expect(reply.status == 200)
        }
        release.signal()
        await proxy.logs.wait(for: "Dropped access log lines")
        for _ in 0..<10 { release.signal() }
        try await proxy.stop()
    }
}
