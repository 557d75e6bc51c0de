@_spi(Fuzzing) import Cachalot
import NIOCore
import NIOHTTP1

@_spi(Fuzzing)
extension FuzzTarget {
    /// Feeds `bytes` to a ``RequestParser`` as everything a client sends on a connection, whole,
    /// and again in two reads cut where the first byte says, with a request line of at most 64
    /// bytes and a header section of at most 256 (so that the limits are reached).
    ///
    /// Invariants:
    /// - both ways give the same parts and the same refusal: what is parsed does not depend on
    ///   how the bytes came;
    /// - a head's method is a token that llhttp knows, its target visible ASCII of at most 64
    ///   bytes, its version 1.0 or 1.1, each field's name a token and its value without a
    ///   control byte but the tab, nor a space or tab at either end;
    /// - a head written again (request line, fields, `\r\n` each) parses to the same head;
    /// - parts come in order: a head, body pieces, an end, then the next head;
    /// - nothing traps.
    public static func request(_ bytes: UnsafeRawBufferPointer) {
        guard let first = bytes.first else { return }
        let rest = Array(bytes.dropFirst())
        let cut = Int(first) % (rest.count + 1)
        let whole = Self.parseRequests([rest[...]])
        let split = Self.parseRequests([rest[..<cut], rest[cut...]])
        precondition(whole.parts == split.parts && whole.error == split.error, "the parse depends on the reads")
        var isInBody = false
        for part in whole.parts {
            switch part {
            case .head(let head):
                precondition(!isInBody, "a head before the end of the request before it")
                Self.checkHead(head)
                isInBody = true
            case .body:
                precondition(isInBody, "a body piece outside a request")
            case .end:
                precondition(isInBody, "an end without a head")
                isInBody = false
            }
        }
    }

    private static func parseRequests(
        _ reads: [ArraySlice<UInt8>]
    ) -> (parts: [HTTPServerRequestPart], error: RequestParseError?) {
        var parser = RequestParser(maximumRequestLine: 64, maximumHeaderBytes: 256)
        var buffer = ByteBuffer()
        var parts: [HTTPServerRequestPart] = []
        var refusal: RequestParseError?
        reading: for read in reads {
            buffer.writeBytes(read)
            do {
                while let part = try parser.next(&buffer) { parts.append(part) }
            } catch {
                refusal = error
                break reading
            }
        }
        // Body pieces joined, so that the two ways compare.
        var joined: [HTTPServerRequestPart] = []
        for part in parts {
            if case .body(var piece) = part, case .body(var last)? = joined.last {
                last.writeBuffer(&piece)
                joined[joined.count - 1] = .body(last)
            } else {
                joined.append(part)
            }
        }
        return (joined, refusal)
    }

    private static func checkHead(_ head: HTTPRequestHead) {
        if case .RAW(let value) = head.method {
            precondition(value == "SOURCE" || value == "QUERY", "a method llhttp does not know: \(value)")
        }
        precondition(head.uri.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "a target with other bytes")
        precondition(head.uri.utf8.count <= 64, "a target over the limit")
        precondition(head.version == .http1_0 || head.version == .http1_1, "version \(head.version)")
        for (name, value) in head.headers {
            precondition(!name.isEmpty && name.utf8.allSatisfy(RequestParser.isTokenByte), "a name not a token")
            precondition(
                value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) },
                "a control byte in a value"
            )
            precondition(value.utf8.first != 0x20 && value.utf8.first != 0x09, "a value that starts with a space")
            precondition(value.utf8.last != 0x20 && value.utf8.last != 0x09, "a value that ends with a space")
        }
        // Written again, without a body's framing (its length or coding), which needs the body.
        let method = head.method == .MSEARCH ? "M-SEARCH" : head.method.rawValue
        var text = "\(method) \(head.uri) HTTP/\(head.version.major).\(head.version.minor)\r\n"
        for (name, value) in head.headers
        where name.lowercased() != "content-length" && name.lowercased() != "transfer-encoding" {
            text += "\(name): \(value)\r\n"
        }
        text += "\r\n"
        var parser = RequestParser(maximumRequestLine: 64, maximumHeaderBytes: 1 << 20)
        var buffer = ByteBuffer(string: text)
        guard case .head(let again)? = try? parser.next(&buffer) else {
            preconditionFailure("a head written again does not parse: \(text.debugDescription)")
        }
        let kept = head.headers.filter {
            $0.name.lowercased() != "content-length" && $0.name.lowercased() != "transfer-encoding"
        }
        precondition(
            again.method == head.method && again.uri == head.uri && again.version == head.version
                && again.headers.elementsEqual(kept, by: { $0.name == $1.name && $0.value == $1.value }),
            "a head written again parses to another"
        )
    }
}
