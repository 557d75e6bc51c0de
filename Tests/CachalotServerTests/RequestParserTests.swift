@_spi(Fuzzing) import Cachalot
import CachalotTesting
import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@_spi(Fuzzing) @testable import CachalotServer

@Suite("RequestParser: a connection's requests from its bytes")
struct RequestParserTests {
    /// What a connection's reads parse to: each part as text (a body's pieces joined), then the
    /// refusal, if any.
    struct Parsed: Equatable, CustomStringConvertible {
        var parts: [String] = []
        var error: RequestParseError?

        var description: String { "\(self.parts) \(self.error.map { "\($0)" } ?? "")" }
    }

    static func parse<Reads: Sequence>(
        _ reads: Reads,
        maximumRequestLine: Int = 8 << 10,
        maximumHeaderBytes: Int = 32 << 10
    ) -> Parsed where Reads.Element: Sequence<UInt8> {
        let channel = EmbeddedChannel(
            handler: RequestDecoder(maximumRequestLine: maximumRequestLine, maximumHeaderBytes: maximumHeaderBytes)
        )
        var parsed = Parsed()
        for read in reads {
            do {
                try channel.writeInbound(ByteBuffer(bytes: Array(read)))
            } catch let error as RequestParseError {
                #expect(parsed.error == nil, "refused once only")
                parsed.error = error
            } catch {
                Issue.record("an error other than a refusal: \(error)")
            }
            while let part = try? channel.readInbound(as: HTTPServerRequestPart.self) {
                switch part {
                case .head(let head):
                    let fields = head.headers.map { "\($0.name): \($0.value)" }.joined(separator: "|")
                    parsed.parts.append("\(head.method.rawValue) \(head.uri) \(head.version) [\(fields)]")
                case .body(let piece):
                    if let last = parsed.parts.last, last.hasPrefix("body ") {
                        parsed.parts[parsed.parts.count - 1] = last + String(buffer: piece)
                    } else {
                        parsed.parts.append("body " + String(buffer: piece))
                    }
                case .end(let trailers):
                    #expect(trailers == nil)
                    parsed.parts.append("end")
                }
            }
        }
        _ = try? channel.finish()
        return parsed
    }

    /// `text` read whole, in two reads split at every point, and in reads of every size: each
    /// way must parse alike.
    static func parseEveryWay(
        _ text: String,
        maximumRequestLine: Int = 8 << 10,
        maximumHeaderBytes: Int = 32 << 10
    ) -> Parsed {
        let bytes = Array(text.utf8)
        let whole = Self.parse(
            [bytes],
            maximumRequestLine: maximumRequestLine,
            maximumHeaderBytes: maximumHeaderBytes
        )
        var splits = (0...bytes.count).map { [bytes[..<$0], bytes[$0...]] }
        for size in 1...max(1, bytes.count) {
            splits.append(stride(from: 0, to: bytes.count, by: size).map { bytes[$0..<min($0 + size, bytes.count)] })
        }
        for reads in splits {
            let parsed = Self.parse(
                reads,
                maximumRequestLine: maximumRequestLine,
                maximumHeaderBytes: maximumHeaderBytes
            )
            #expect(parsed == whole, "reads of \(reads.map(\.count))")
        }
        return whole
    }

    @Test("a byte is a token byte exactly when RFC 9110 §5.6.2 makes it a tchar")
    func tokenBytes() {
        let tchars = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(RequestParser.isTokenByte(byte) == tchars.contains(byte), "byte \(byte)")
        }
    }

    static let accepted: [(String, [String])] = [
        ("GET /a HTTP/1.1\r\nHost: x\r\n\r\n", ["GET /a HTTP/1.1 [Host: x]", "end"]),
        // Spaces and tabs around a value go; inside it they stay; obs-text stays.
        (
            "HEAD /a?b=c HTTP/1.0\r\nX-A:  \t v  w \t\r\nX-B:\r\nX-C: caf\u{E9}\r\n\r\n",
            ["HEAD /a?b=c HTTP/1.0 [X-A: v  w|X-B: |X-C: caf\u{E9}]", "end"]
        ),
        // Empty lines before a request line are skipped.
        ("\r\n\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n", ["GET /a HTTP/1.1 [Host: x]", "end"]),
        // Pipelined, with bodies of each framing.
        (
            "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
            ["POST /p HTTP/1.1 [Host: x|Content-Length: 5]", "body hello", "end", "GET /b HTTP/1.1 [Host: x]", "end"]
        ),
        (
            "PUT /p HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n5;ext=1\r\nhello\r\n1A ;e=\"v\"\r\n"
                + String(repeating: "z", count: 26) + "\r\n0\r\nX-Trailer: t\r\n\r\nGET /c HTTP/1.1\r\n\r\n",
            [
                "PUT /p HTTP/1.1 [Transfer-Encoding: Chunked]", "body hello" + String(repeating: "z", count: 26),
                "end", "GET /c HTTP/1.1 []", "end",
            ]
        ),
        (
            "POST /p HTTP/1.1\r\nContent-Length: 02\r\n\r\nok",
            ["POST /p HTTP/1.1 [Content-Length: 02]", "body ok", "end"]
        ),
        // A later 1.x minor version is read as 1.1 (RFC 9110 §2.5); extension methods as spelt.
        ("OPTIONS * HTTP/1.7\r\n\r\n", ["OPTIONS * HTTP/1.1 []", "end"]),
        // M-SEARCH is NIO's MSEARCH, whose raw value lacks the hyphen.
        ("M-SEARCH /m HTTP/1.1\r\n\r\n", ["MSEARCH /m HTTP/1.1 []", "end"]),
        ("QUERY /q HTTP/1.1\r\nContent-Length: 0\r\n\r\n", ["QUERY /q HTTP/1.1 [Content-Length: 0]", "end"]),
    ]

    @Test("requests parse to their parts however the bytes are split into reads", arguments: Self.accepted.indices)
    func acceptedRequests(index: Int) {
        let (text, parts) = Self.accepted[index]
        let parsed = Self.parseEveryWay(text)
        #expect(parsed == Parsed(parts: parts))
    }

    static let refused: [(String, RequestParseError, [String])] = [
        ("GET /a HTTP/1.1\r\nHost : x\r\n\r\n", .malformed("a field name that is not a token"), []),
        ("GET /a HTTP/1.1\r\n: x\r\n\r\n", .malformed("a field name that is not a token"), []),
        ("GET /a HTTP/1.1\r\nNoColon\r\n\r\n", .malformed("a field line without a colon"), []),
        ("GET /a HTTP/1.1\r\nX: a\r\n b\r\n\r\n", .malformed("a folded field line"), []),
        ("GET /a HTTP/1.1\r\nX: a\rb\r\n\r\n", .malformed("a control byte in a field's value"), []),
        ("GET /a HTTP/1.1\r\nX: a\u{7F}\r\n\r\n", .malformed("a control byte in a field's value"), []),
        ("GET /a HTTP/1.1\r\nX: a\0\r\n\r\n", .malformed("a control byte in a field's value"), []),
        ("GET /\u{E9} HTTP/1.1\r\n\r\n", .malformed("a target that is not visible ASCII"), []),
        ("GET /a\tb HTTP/1.1\r\n\r\n", .malformed("a target that is not visible ASCII"), []),
        ("GET /a HTTP/1.1 \r\n\r\n", .malformed("not an HTTP version"), []),
        ("GET /a\r\n\r\n", .malformed("a request line without a version"), []),
        ("GET /a  HTTP/1.1\r\n\r\n", .malformed("not an HTTP version"), []),
        ("GET /a HTTP/1.1\r\r\n\r\n", .malformed("not an HTTP version"), []),
        ("GET /a http/1.1\r\n\r\n", .malformed("not an HTTP version"), []),
        ("GET /a HTTP/1.x\r\n\r\n", .malformed("not an HTTP version"), []),
        ("GET /a HTTP/2.0\r\n\r\n", .unsupportedVersion, []),
        ("G@T /a HTTP/1.1\r\n\r\n", .malformed("a method that is not a token"), []),
        ("BREW /a HTTP/1.1\r\n\r\n", .unknownMethod, []),
        ("MSEARCH /a HTTP/1.1\r\n\r\n", .unknownMethod, []),
        ("GET\r\n\r\n", .malformed("a request line without spaces"), []),
        (
            "POST /a HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            .malformed("both Content-Length and Transfer-Encoding"), []
        ),
        (
            "POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            .malformed("more than one Content-Length"), []
        ),
        (
            "POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
            .malformed("more than one Content-Length"), []
        ),
        ("POST /a HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n", .malformed("a Content-Length that is not a number"), []),
        ("GET /a HTTP/1.1\nHost: x\r\n\r\n", .malformed("a line feed without a carriage return"), []),
        ("GET /a HTTP/1.1\r\nHost: x\n\n", .malformed("a line feed without a carriage return"), []),
        (
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\nab\r\n",
            .malformed("a line feed without a carriage return"), ["POST /a HTTP/1.1 [Transfer-Encoding: chunked]"]
        ),
        (
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\n0\r\n\r\n",
            .malformed("chunk data longer than its size"), ["POST /a HTTP/1.1 [Transfer-Encoding: chunked]", "body a"]
        ),
        ("POST /a HTTP/1.1\r\nContent-Length: -1\r\n\r\n", .malformed("a Content-Length that is not a number"), []),
        ("POST /a HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", .malformed("a Content-Length that is not a number"), []),
        ("POST /a HTTP/1.1\r\nContent-Length:\r\n\r\n", .malformed("a Content-Length that is not a number"), []),
        (
            "POST /a HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n",
            .malformed("a Content-Length that is not a number"), []
        ),
        ("POST /a HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", .unknownTransferCoding, []),
        (
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            .malformed("chunked not once"), []
        ),
        ("POST /a HTTP/1.1\r\nTransfer-Encoding: ,\r\n\r\n", .malformed("chunked not once"), []),
        ("POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", .malformed("Transfer-Encoding in HTTP/1.0"), []),
        // Errors in a chunked body come after its head.
        (
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
            .malformed("chunk data longer than its size"), ["POST /a HTTP/1.1 [Transfer-Encoding: chunked]", "body a"]
        ),
        (
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nx\r\n",
            .malformed("a chunk without a size"), ["POST /a HTTP/1.1 [Transfer-Encoding: chunked]"]
        ),
        (
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1 x\r\n",
            .malformed("a chunk size followed by other bytes"), ["POST /a HTTP/1.1 [Transfer-Encoding: chunked]"]
        ),
        (
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1 \r\n",
            .malformed("a chunk size followed by other bytes"), ["POST /a HTTP/1.1 [Transfer-Encoding: chunked]"]
        ),
        (
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
            .malformed("a chunk size too large"), ["POST /a HTTP/1.1 [Transfer-Encoding: chunked]"]
        ),
        (
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer: x\r\n\r\n",
            .malformed("a field name that is not a token"), ["POST /a HTTP/1.1 [Transfer-Encoding: chunked]"]
        ),
        // After a refusal nothing more is read: the next request gives nothing.
        (
            "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/9.9\r\n\r\nGET /c HTTP/1.1\r\n\r\n",
            .unsupportedVersion, ["GET /a HTTP/1.1 []", "end"]
        ),
    ]

    @Test(
        "a request that is not HTTP/1.1 as RFC 9112 frames it is refused, however it is split, and nothing after it is read",
        arguments: Self.refused.indices
    )
    func refusedRequests(index: Int) {
        let (text, error, parts) = Self.refused[index]
        #expect(Self.parseEveryWay(text) == Parsed(parts: parts, error: error))
    }

    @Test("a request line over its limit is refused with 414 as soon as its bytes show it, finished or not")
    func requestLineLimit() {
        let line = "GET /aaaaaaa HTTP/1.1"  // 21 bytes
        #expect(Self.parseEveryWay(line + "\r\n\r\n", maximumRequestLine: 21).error == nil)
        #expect(Self.parseEveryWay(line + "\r\n\r\n", maximumRequestLine: 20).error == .requestLineTooLong)
        // Never finished: refused once more bytes than a line may have (and its carriage return) came.
        let endless = "GET /" + String(repeating: "a", count: 100)
        #expect(Self.parse([Array(endless.utf8)], maximumRequestLine: 104).error == nil)
        #expect(Self.parse([Array(endless.utf8)], maximumRequestLine: 103).error == .requestLineTooLong)
        // Long fields are not a long request line.
        let fields = "GET /a HTTP/1.1\r\nX: " + String(repeating: "v", count: 100) + "\r\n\r\n"
        #expect(Self.parseEveryWay(fields, maximumRequestLine: 20).error == nil)
    }

    @Test("a header section over its limit is refused with 431 as soon as its bytes show it; a trailer section too")
    func headerLimit() {
        // Field lines of 10 bytes each, their ends included.
        let head = "GET /a HTTP/1.1\r\nX-1: 123\r\nX-2: 456\r\n\r\n"
        #expect(Self.parseEveryWay(head, maximumHeaderBytes: 20).error == nil)
        #expect(Self.parseEveryWay(head, maximumHeaderBytes: 19).error == .headerTooLarge)
        let endless = "GET /a HTTP/1.1\r\nX: " + String(repeating: "v", count: 100)
        // Never finished: refused once its line, with the line feed it must end with, is over.
        #expect(Self.parse([Array(endless.utf8)], maximumHeaderBytes: 104).error == nil)
        #expect(Self.parse([Array(endless.utf8)], maximumHeaderBytes: 103).error == .headerTooLarge)
        // A head of 28 bytes of fields, then trailers of 30.
        let trailers =
            "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-1: 123\r\nX-2: 456\r\nX-3: 789\r\n\r\n"
        #expect(Self.parseEveryWay(trailers, maximumHeaderBytes: 30).error == nil)
        #expect(Self.parseEveryWay(trailers, maximumHeaderBytes: 29).error == .headerTooLarge)
    }
}

@Suite("RequestParser against NIO's llhttp decoder")
struct RequestParserDifferentialTests {
    /// What NIO's `HTTPRequestDecoder` (llhttp), which the server used before, makes of `bytes`:
    /// as ``RequestParserTests/parse(_:maximumRequestLine:maximumHeaderBytes:)`` describes it,
    /// with any error it raises as a refusal of no kind.
    static func parseWithNIO(_ bytes: [UInt8]) -> (parts: [String], refused: Bool) {
        let channel = EmbeddedChannel(
            handler: ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes))
        )
        var parts: [String] = []
        var refused = false
        do {
            try channel.writeInbound(ByteBuffer(bytes: bytes))
        } catch {
            refused = true
        }
        while let part = try? channel.readInbound(as: HTTPServerRequestPart.self) {
            switch part {
            case .head(let head):
                let fields = head.headers.map { "\($0.name): \($0.value)" }.joined(separator: "|")
                parts.append("\(head.method.rawValue) \(head.uri) \(head.version) [\(fields)]")
            case .body(let piece):
                if let last = parts.last, last.hasPrefix("body ") {
                    parts[parts.count - 1] = last + String(buffer: piece)
                } else {
                    parts.append("body " + String(buffer: piece))
                }
            case .end:
                parts.append("end")
            }
        }
        _ = try? channel.finish()
        return (parts, refused)
    }

    /// A request made of pieces picked at random, most of them valid, some not.
    static func request(_ random: inout SeededGenerator) -> String {
        let methods = ["GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "M-SEARCH", "PROPFIND", "BREW", "get"]
        let targets = ["/", "/a?b=c", "*", "/a%20b", "http://x/a", "/a;b=c", "/{x}", "/a|b", "/\"q\"", "/a\\b"]
        let versions = ["HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/1.2", "HTTP/2.0", "HTTP/1.1 ", "http/1.1"]
        let fields = [
            "Host: x", "Host: x", "X-A:  v w  ", "X-B:", "X-C: caf\u{E9}", "Connection: close",
            "Connection: keep-alive", "Accept: */*", "X-D: a\u{1}b", "X D: y", "X-E : y", "NoColon", " folded",
            "X-F: a\tb", "X-G:\tv\t", "Content-Type: text/plain",
        ]
        let ends = ["\r\n", "\r\n", "\r\n", "\n"]
        var text = ""
        for _ in 0..<Int.random(in: 1...2, using: &random) {
            let end = ends.randomElement(using: &random)!
            let version = versions.randomElement(using: &random)!
            var request = methods.randomElement(using: &random)! + " " + targets.randomElement(using: &random)! + " "
            request += version + end
            for _ in 0..<Int.random(in: 0...3, using: &random) {
                request += fields.randomElement(using: &random)! + end
            }
            switch Int.random(in: 0..<8, using: &random) {
            case 0: request += "Content-Length: 3" + end + end + "abc"
            case 1: request += "Content-Length: 3, 3" + end + end + "abc"
            case 2: request += "Transfer-Encoding: chunked" + end + end + "3;x=y\r\nabc\r\n0\r\n\r\n"
            case 3: request += "Transfer-Encoding: chunked" + end + end + "3\r\nabc\r\n0\r\nX-T: t\r\n\r\n"
            case 4: request += "Content-Length: 3" + end + "Content-Length: 4" + end + end + "abcd"
            case 5: request += "Transfer-Encoding: chunked" + end + "Content-Length: 3" + end + end + "abc"
            default: request += end
            }
            text += request
            // llhttp refuses what follows a request that closes the connection, which the
            // server drops unread (RFC 9112 §9.6): no request follows one.
            guard version.hasPrefix("HTTP/1.1"), !request.contains("Connection: close") else { break }
        }
        return text
    }

    /// Where the two may differ, by design: each a predicate on the request's text.
    static let differences: [(String, @Sendable (String) -> Bool)] = [
        // RFC 9110 §2.5: read as HTTP/1.1. llhttp refuses it.
        ("a later HTTP/1.x", { $0.contains("HTTP/1.2") }),
        // RFC 9112 §5: not part of the value. llhttp keeps them.
        ("a value that ends with spaces or tabs", { $0.contains("  \r\n") || $0.contains("\t\r\n") }),
        // RFC 9112 §6.1: the framing is faulty. llhttp reads the chunks.
        ("Transfer-Encoding in HTTP/1.0", { $0.contains("HTTP/1.0") && $0.contains("Transfer-Encoding") }),
    ]

    @Test("what both accept, they read alike; what one refuses, the other refuses too, but for the differences named")
    func sameAsLLHTTP() {
        var random = SeededGenerator(seed: 9112)
        var unexplained: [String] = []
        for _ in 0..<5_000 {
            let text = Self.request(&random)
            let bytes = Array(text.utf8)
            let ours = RequestParserTests.parse([bytes])
            let theirs = Self.parseWithNIO(bytes)
            let same = ours.parts == theirs.parts && (ours.error != nil) == theirs.refused
            if !same, !Self.differences.contains(where: { $0.1(text) }) {
                unexplained.append("\(text.debugDescription)\n  ours: \(ours)\n  llhttp: \(theirs)")
            }
        }
        #expect(unexplained.isEmpty, "\(unexplained.count) differ:\n\(unexplained.prefix(40).joined(separator: "\n"))")
    }
}

@Suite("RequestParser's fuzz inputs replay")
struct RequestFuzzReplayTests {
    @Test("the request fuzzer's seeds and the inputs that once crashed it replay")
    func replay() throws {
        let fuzz = URL(filePath: #filePath)
            .deletingLastPathComponent()  // CachalotServerTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()
            .appending(path: "Fuzz")
        var replayed = 0
        for kind in ["Seeds", "Regressions"] {
            let folder = fuzz.appending(path: kind).appending(path: "request")
            guard FileManager.default.fileExists(atPath: folder.path) else { continue }
            for file in try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            where !file.lastPathComponent.hasPrefix(".") {
                try Data(contentsOf: file).withUnsafeBytes { FuzzTarget.request($0) }
                replayed += 1
            }
        }
        #expect(replayed > 0, "no seeds in \(fuzz.path)/Seeds/request")
    }
}
