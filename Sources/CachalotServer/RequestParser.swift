import NIOCore
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A request the parser refused, and the status that answers it.
enum RequestParseError: Error, Equatable, CustomStringConvertible {
    /// Not HTTP/1.1 as RFC 9112 frames it: 400.
    case malformed(String)
    /// A request line longer than the limit: 414.
    case requestLineTooLong
    /// A header section, or a body's trailer section, over the limit: 431.
    case headerTooLarge
    /// A method that is a token but not one HTTP names: 501 (RFC 9110 §9.1).
    case unknownMethod
    /// A transfer coding other than `chunked`: 501 (RFC 9112 §6.1).
    case unknownTransferCoding
    /// A major version other than 1: 505.
    case unsupportedVersion

    var status: HTTPResponseStatus {
        switch self {
        case .malformed: .badRequest
        case .requestLineTooLong: .uriTooLong
        case .headerTooLarge: .requestHeaderFieldsTooLarge
        case .unknownMethod, .unknownTransferCoding: .notImplemented
        case .unsupportedVersion: .httpVersionNotSupported
        }
    }

    var description: String {
        switch self {
        case .malformed(let reason): "malformed request: \(reason)"
        case .requestLineTooLong: "request line over the limit"
        case .headerTooLarge: "header section over the limit"
        case .unknownMethod: "unknown method"
        case .unknownTransferCoding: "transfer coding other than chunked"
        case .unsupportedVersion: "HTTP version other than 1.x"
        }
    }
}

/// HTTP/1.1 requests read from a connection's bytes (RFC 9112), one part at a time.
///
/// Strict where leniency could let a request be read two ways (RFC 9112 §11.2), as llhttp is in
/// NIO's configuration: a line that does not end with a carriage return and a line feed, a field
/// line folded or with whitespace before its colon, a control byte in a field's value, a target
/// that is not visible ASCII, both `Content-Length` and `Transfer-Encoding`, two
/// `Content-Length`s or a list in one, `Transfer-Encoding` in HTTP/1.0 (RFC 9112 §6.1), a coding
/// other than `chunked` (501), `chunked` twice: each is refused, and nothing after it is read.
/// Empty lines before a request line are skipped (RFC 9112 §2.2). A method must be a token; one
/// that llhttp does not know is refused with 501, so that no arbitrary token is forwarded. Where
/// it differs from llhttp (`RequestParserDifferentialTests` names each difference): `HTTP/1.x`
/// for a later x is read as HTTP/1.1 (RFC 9110 §2.5), where llhttp refuses it; the spaces and
/// tabs that end a field's value are not part of it (RFC 9112 §5), where llhttp keeps them; and
/// `Transfer-Encoding` in HTTP/1.0 is refused.
///
/// Limits: a request line longer than `maximumRequestLine` bytes (without its line's end) is
/// refused with 414, and a header section whose field lines, their ends included, come to more
/// than `maximumHeaderBytes` with 431, as soon as the bytes read show it, however far the line
/// goes on. A chunk's size line may be as long as a request line; a trailer section as large as
/// a header section. Trailer fields are checked and dropped: nothing after the parser reads
/// them.
///
/// It takes the place of NIO's `HTTPRequestDecoder` (llhttp), whose callbacks and
/// `ByteToMessageHandler` took 9.6k instructions of a 1 KB memory hit's 42.7k, where this parser
/// and ``RequestDecoder`` take 5.3k (docs/performance.md, 2026-12-08), and which could not say
/// whether a head that overflowed had a long request line or long fields.
struct RequestParser {
    let maximumRequestLine: Int
    let maximumHeaderBytes: Int

    private enum State {
        /// Reading a head (or a trailer section): `scan` says how far.
        case head(HeadScan)
        /// Reading a body of a known length: bytes still to come.
        case body(remaining: Int)
        /// Reading a chunk's size line.
        case chunkSize
        /// Reading a chunk's data: bytes still to come.
        case chunkData(remaining: Int)
        /// Reading the line end after a chunk's data.
        case chunkDataEnd
        /// Reading the trailer section after the last chunk.
        case trailers(HeadScan)
        /// Refused: nothing more is read.
        case failed
    }

    /// How far the bytes of a head, not yet taken from the buffer, have been looked through.
    private struct HeadScan {
        /// Bytes looked through, from the buffer's reader index: whole lines.
        var scanned = 0
        /// Whether the request line (for a trailer section: nothing) is behind.
        var isPastFirstLine = false
        /// The bytes of field lines so far, their ends included.
        var fieldBytes = 0
    }

    private var state = State.head(HeadScan())

    init(maximumRequestLine: Int, maximumHeaderBytes: Int) {
        self.maximumRequestLine = maximumRequestLine
        self.maximumHeaderBytes = maximumHeaderBytes
    }

    /// The next part from `buffer`, whose bytes it takes; `nil` when more bytes are needed, or
    /// after a refusal. A refusal throws once; the parser then takes every byte and gives nothing.
    mutating func next(_ buffer: inout ByteBuffer) throws(RequestParseError) -> HTTPServerRequestPart? {
        do {
            return try self.parse(&buffer)
        } catch {
            self.state = .failed
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            throw error
        }
    }

    private mutating func parse(_ buffer: inout ByteBuffer) throws(RequestParseError) -> HTTPServerRequestPart? {
        switch self.state {
        case .head(var scan):
            if !scan.isPastFirstLine, scan.scanned == 0 { Self.skipEmptyLines(&buffer) }
            guard let length = try self.findHeadEnd(buffer, &scan) else {
                self.state = .head(scan)
                return nil
            }
            let (head, framing) = try buffer.withUnsafeReadableBytes { Self.readHead($0[..<length]) }.get()
            buffer.moveReaderIndex(forwardBy: length)
            switch framing {
            case .length(let count):
                // With none, its end comes next, without reading any more.
                self.state = .body(remaining: count)
            case .chunked:
                self.state = .chunkSize
            }
            return .head(head)
        case .body(let remaining):
            guard remaining > 0 else {
                self.state = .head(HeadScan())
                return .end(nil)
            }
            guard buffer.readableBytes > 0 else { return nil }
            let count = min(remaining, buffer.readableBytes)
            self.state = .body(remaining: remaining - count)
            return .body(buffer.readSlice(length: count)!)
        case .chunkSize:
            guard let line = try Self.findLine(buffer, limit: self.maximumRequestLine) else { return nil }
            let size = try buffer.withUnsafeReadableBytes { Self.chunkSize($0[..<line.content]) }.get()
            buffer.moveReaderIndex(forwardBy: line.length)
            self.state = size == 0 ? .trailers(HeadScan(isPastFirstLine: true)) : .chunkData(remaining: size)
            return try self.parse(&buffer)
        case .chunkData(let remaining):
            guard buffer.readableBytes > 0 else { return nil }
            let count = min(remaining, buffer.readableBytes)
            self.state = count == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - count)
            return .body(buffer.readSlice(length: count)!)
        case .chunkDataEnd:
            // A line's end, and nothing else: the data is as long as its size says.
            guard buffer.readableBytes >= 2 else {
                if let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self), first != .carriageReturn {
                    throw .malformed("chunk data longer than its size")
                }
                return nil
            }
            guard buffer.getInteger(at: buffer.readerIndex, as: UInt16.self) == 0x0D0A else {
                throw .malformed("chunk data longer than its size")
            }
            buffer.moveReaderIndex(forwardBy: 2)
            self.state = .chunkSize
            return try self.parse(&buffer)
        case .trailers(var scan):
            guard let length = try self.findHeadEnd(buffer, &scan) else {
                self.state = .trailers(scan)
                return nil
            }
            try buffer.withUnsafeReadableBytes { Self.checkTrailers($0[..<length]) }.get()
            buffer.moveReaderIndex(forwardBy: length)
            self.state = .head(HeadScan())
            return .end(nil)
        case .failed:
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            return nil
        }
    }

    // MARK: - Lines

    /// Drops the empty lines a client may send before a request line (RFC 9112 §2.2).
    private static func skipEmptyLines(_ buffer: inout ByteBuffer) {
        while let byte = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) {
            if byte == .lineFeed {
                buffer.moveReaderIndex(forwardBy: 1)
            } else if byte == .carriageReturn,
                buffer.getInteger(at: buffer.readerIndex + 1, as: UInt8.self) == .lineFeed
            {
                buffer.moveReaderIndex(forwardBy: 2)
            } else {
                return
            }
        }
    }

    /// The length of the head at the start of `buffer`, its empty line included, once it has
    /// all come; looks through whole lines only once, noting how far in `scan`. Throws as soon
    /// as a line is over its limit.
    private func findHeadEnd(_ buffer: ByteBuffer, _ scan: inout HeadScan) throws(RequestParseError) -> Int? {
        let found = buffer.withUnsafeReadableBytes { self.findHeadEnd($0, &scan) }
        return try found.get()
    }

    private func findHeadEnd(
        _ bytes: UnsafeRawBufferPointer,
        _ scan: inout HeadScan
    ) -> Result<Int?, RequestParseError> {
        guard let base = bytes.baseAddress else { return .success(nil) }
        while scan.scanned < bytes.count {
            let start = scan.scanned
            guard let found = memchr(base + start, Int32(UInt8.lineFeed), bytes.count - start) else {
                // A line still coming: over its limit already?
                let partial = bytes.count - start
                if !scan.isPastFirstLine {
                    // Its carriage return may have come.
                    if partial > self.maximumRequestLine + 1 { return .failure(.requestLineTooLong) }
                } else if partial > 1 || bytes[start] != .carriageReturn,
                    scan.fieldBytes + partial + 1 > self.maximumHeaderBytes
                {
                    // Not the empty line's carriage return: a field line, which ends with a line feed.
                    return .failure(.headerTooLarge)
                }
                return .success(nil)
            }
            let end = base.distance(to: UnsafeRawPointer(found))
            let lineLength = end - start + 1
            scan.scanned = end + 1
            if !scan.isPastFirstLine {
                let content = end > start && bytes[end - 1] == .carriageReturn ? end - start - 1 : end - start
                if content > self.maximumRequestLine { return .failure(.requestLineTooLong) }
                scan.isPastFirstLine = true
                continue
            }
            if lineLength == 1 || (lineLength == 2 && bytes[start] == .carriageReturn) {
                return .success(scan.scanned)
            }
            scan.fieldBytes += lineLength
            if scan.fieldBytes > self.maximumHeaderBytes { return .failure(.headerTooLarge) }
        }
        return .success(nil)
    }

    /// The length of the next line in `buffer`, with and without its end, once its end has come;
    /// throws if it is longer than `limit` bytes.
    private static func findLine(
        _ buffer: ByteBuffer,
        limit: Int
    ) throws(RequestParseError) -> (length: Int, content: Int)? {
        let view = buffer.readableBytesView
        guard let lineFeed = view.firstIndex(of: .lineFeed) else {
            if view.count > limit + 1 { throw .malformed("a chunk's line over the limit") }
            return nil
        }
        // Over the limit whatever its end: as a line without its line feed yet would be.
        let beforeLineFeed = lineFeed - view.startIndex
        guard beforeLineFeed <= limit + 1 else { throw .malformed("a chunk's line over the limit") }
        guard beforeLineFeed > 0, view[lineFeed - 1] == .carriageReturn else {
            throw .malformed("a line feed without a carriage return")
        }
        return (beforeLineFeed + 1, beforeLineFeed - 1)
    }

    /// The bytes of a head, or a part of them.
    private typealias Bytes = Slice<UnsafeRawBufferPointer>

    /// The lines of a whole head or trailer section, its empty line included, each without its
    /// end, which must be a carriage return and a line feed.
    private struct Lines {
        var rest: Bytes

        mutating func next() throws(RequestParseError) -> Bytes? {
            guard let lineFeed = RequestParser.firstIndex(of: .lineFeed, in: self.rest) else { return nil }
            guard lineFeed > self.rest.startIndex, self.rest.base[lineFeed - 1] == .carriageReturn else {
                throw .malformed("a line feed without a carriage return")
            }
            let line = self.rest.base[self.rest.startIndex..<(lineFeed - 1)]
            self.rest = self.rest.base[(lineFeed + 1)..<self.rest.endIndex]
            return line
        }
    }

    /// Where `byte` first is in `bytes`, found with `memchr`.
    private static func firstIndex(of byte: UInt8, in bytes: Bytes) -> Int? {
        guard let base = bytes.base.baseAddress, !bytes.isEmpty else { return nil }
        let start = base + bytes.startIndex
        guard let found = memchr(start, Int32(byte), bytes.count) else { return nil }
        return bytes.startIndex + start.distance(to: UnsafeRawPointer(found))
    }

    /// Whether every byte of `bytes` is one `isIncluded` takes, read without bounds checks.
    private static func all(_ bytes: Bytes, _ isIncluded: (UInt8) -> Bool) -> Bool {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            guard isIncluded(bytes.base[index]) else { return false }
            index += 1
        }
        return true
    }

    /// Whether `bytes` are those of `text`.
    private static func equals(_ bytes: Bytes, _ text: StaticString) -> Bool {
        guard bytes.count == text.utf8CodeUnitCount, let base = bytes.base.baseAddress else {
            return bytes.isEmpty && text.utf8CodeUnitCount == 0
        }
        return memcmp(base + bytes.startIndex, text.utf8Start, bytes.count) == 0
    }

    // MARK: - Heads

    /// How a request's body is delimited (RFC 9112 §6.3).
    private enum Framing {
        case length(Int)
        case chunked
    }

    /// The head in `bytes` (a whole head, its empty line included), and its body's framing.
    private static func readHead(_ bytes: Bytes) -> Result<(HTTPRequestHead, Framing), RequestParseError> {
        Result { () throws(RequestParseError) in
            var lines = Lines(rest: bytes)
            guard let requestLine = try lines.next() else { throw .malformed("no request line") }
            let (method, target, version) = try Self.readRequestLine(requestLine)
            var fields: [(String, String)] = []
            // Room for a browser's fields without growing.
            fields.reserveCapacity(16)
            var lengths: [Bytes] = []
            var codings: [Bytes] = []
            while let line = try lines.next(), !line.isEmpty {
                let (name, value) = try Self.readField(line)
                if Self.isNamed(name, "content-length") {
                    lengths.append(value)
                } else if Self.isNamed(name, "transfer-encoding") {
                    codings.append(value)
                }
                fields.append((Self.string(name), Self.string(value)))
            }
            let framing: Framing
            if !codings.isEmpty {
                guard lengths.isEmpty else { throw .malformed("both Content-Length and Transfer-Encoding") }
                guard version.minor >= 1 else { throw .malformed("Transfer-Encoding in HTTP/1.0") }
                try Self.checkCodings(codings)
                framing = .chunked
            } else if !lengths.isEmpty {
                framing = .length(try Self.contentLength(lengths))
            } else {
                framing = .length(0)
            }
            let head = HTTPRequestHead(version: version, method: method, uri: target, headers: HTTPHeaders(fields))
            return (head, framing)
        }
    }

    private static func string(_ bytes: Bytes) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes), as: UTF8.self)
    }

    /// `method SP request-target SP HTTP-version` (RFC 9112 §3).
    private static func readRequestLine(_ line: Bytes) throws(RequestParseError) -> (HTTPMethod, String, HTTPVersion) {
        guard let firstSpace = Self.firstIndex(of: .space, in: line) else {
            throw .malformed("a request line without spaces")
        }
        let methodBytes = line.base[line.startIndex..<firstSpace]
        guard !methodBytes.isEmpty, Self.all(methodBytes, Self.isTokenByte) else {
            throw .malformed("a method that is not a token")
        }
        let afterMethod = line.base[(firstSpace + 1)..<line.endIndex]
        guard let secondSpace = Self.firstIndex(of: .space, in: afterMethod) else {
            throw .malformed("a request line without a version")
        }
        let targetBytes = line.base[afterMethod.startIndex..<secondSpace]
        guard !targetBytes.isEmpty, Self.all(targetBytes, { $0 > 0x20 && $0 < 0x7F }) else {
            throw .malformed("a target that is not visible ASCII")
        }
        let version = try Self.readVersion(line.base[(secondSpace + 1)..<line.endIndex])
        let method = try Self.method(methodBytes)
        return (method, Self.string(targetBytes), version)
    }

    /// `HTTP/1.0` or `HTTP/1.1`; `HTTP/1.x` for a later x is read as 1.1 (RFC 9110 §2.5).
    private static func readVersion(_ bytes: Bytes) throws(RequestParseError) -> HTTPVersion {
        if Self.equals(bytes, "HTTP/1.1") { return .http1_1 }
        guard bytes.count == 8, Self.equals(bytes.base[bytes.startIndex..<(bytes.startIndex + 5)], "HTTP/") else {
            throw .malformed("not an HTTP version")
        }
        let start = bytes.startIndex
        let (major, dot, minor) = (bytes.base[start + 5], bytes.base[start + 6], bytes.base[start + 7])
        guard Self.isDigit(major), dot == UInt8(ascii: "."), Self.isDigit(minor) else {
            throw .malformed("not an HTTP version")
        }
        guard major == UInt8(ascii: "1") else { throw .unsupportedVersion }
        return minor == UInt8(ascii: "0") ? .http1_0 : .http1_1
    }

    /// The method `bytes` names, a token, if it is one of llhttp's (RFC 9110's, WebDAV's and a
    /// few more); `GET` and `HEAD` without making a string.
    private static func method(_ bytes: Bytes) throws(RequestParseError) -> HTTPMethod {
        if Self.equals(bytes, "GET") { return .GET }
        if Self.equals(bytes, "HEAD") { return .HEAD }
        let name = Self.string(bytes)
        switch name {
        // NIO's `HTTPMethod(rawValue:)` spells it without its hyphen.
        case "M-SEARCH": return .MSEARCH
        case "MSEARCH": throw .unknownMethod
        case "SOURCE", "QUERY": return .RAW(value: name)
        default:
            let method = HTTPMethod(rawValue: name)
            if case .RAW = method { throw .unknownMethod }
            return method
        }
    }

    /// `field-name ":" OWS field-value OWS` (RFC 9112 §5): a name that is a token, right before
    /// its colon; a value of visible bytes, spaces and tabs, without the spaces and tabs around it.
    private static func readField(_ line: Bytes) throws(RequestParseError) -> (name: Bytes, value: Bytes) {
        guard let colon = Self.firstIndex(of: UInt8(ascii: ":"), in: line) else {
            if let first = line.first, first == .space || first == .tab {
                throw .malformed("a folded field line")
            }
            throw .malformed("a field line without a colon")
        }
        let name = line.base[line.startIndex..<colon]
        guard !name.isEmpty, Self.all(name, Self.isTokenByte) else {
            throw .malformed("a field name that is not a token")
        }
        let value = Self.trimmed(line.base[(colon + 1)..<line.endIndex])
        guard Self.all(value, Self.isFieldValueByte) else { throw .malformed("a control byte in a field's value") }
        return (name, value)
    }

    /// `bytes` without the spaces and tabs it starts and ends with.
    private static func trimmed(_ bytes: Bytes) -> Bytes {
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end, bytes.base[start] == .space || bytes.base[start] == .tab { start += 1 }
        while end > start, bytes.base[end - 1] == .space || bytes.base[end - 1] == .tab { end -= 1 }
        return bytes.base[start..<end]
    }

    /// The trailer section in `bytes` (its empty line included): field lines, checked as a
    /// head's are, and dropped.
    private static func checkTrailers(_ bytes: Bytes) -> Result<Void, RequestParseError> {
        Result { () throws(RequestParseError) in
            var lines = Lines(rest: bytes)
            while let line = try lines.next(), !line.isEmpty {
                _ = try Self.readField(line)
            }
        }
    }

    /// Whether `name`, a token, is `lowercased` (letters and hyphens), in any case: of the token's
    /// bytes, only capital letters become another letter or a hyphen with 0x20 set.
    private static func isNamed(_ name: Bytes, _ lowercased: StaticString) -> Bool {
        guard name.count == lowercased.utf8CodeUnitCount else { return false }
        let expected = lowercased.utf8Start
        for offset in 0..<name.count where name.base[name.startIndex + offset] | 0x20 != expected[offset] {
            return false
        }
        return true
    }

    /// The length that the one `Content-Length` field says: digits only, neither a list nor a
    /// second field (RFC 9110 §8.6 lets a recipient refuse both, as llhttp does).
    private static func contentLength(_ values: [Bytes]) throws(RequestParseError) -> Int {
        guard values.count == 1, let digits = values.first else { throw .malformed("more than one Content-Length") }
        // 18 digits at most: no overflow.
        guard !digits.isEmpty, digits.count <= 18, Self.all(digits, Self.isDigit) else {
            throw .malformed("a Content-Length that is not a number")
        }
        return digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }

    /// Checks that the codings are `chunked`, once (RFC 9112 §6.1, §7).
    private static func checkCodings(_ values: [Bytes]) throws(RequestParseError) {
        var chunked = 0
        for value in values {
            for element in value.split(separator: UInt8(ascii: ",")) {
                let coding = Self.trimmed(element)
                if coding.isEmpty { continue }
                guard Self.isNamed(coding, "chunked") else { throw .unknownTransferCoding }
                chunked += 1
            }
        }
        guard chunked == 1 else { throw .malformed("chunked not once") }
    }

    /// A chunk's size, from its line: `chunk-size [ chunk-ext ]` (RFC 9112 §7.1), extensions
    /// ignored.
    private static func chunkSize(_ line: Bytes) -> Result<Int, RequestParseError> {
        Result { () throws(RequestParseError) in
            var size = 0
            var index = line.startIndex
            while index < line.endIndex, let digit = Self.hexValue(line[index]) {
                // 15 hexadecimal digits at most: no overflow.
                guard index - line.startIndex < 15 else { throw .malformed("a chunk size too large") }
                size = size << 4 | digit
                index += 1
            }
            guard index > line.startIndex else { throw .malformed("a chunk without a size") }
            let rest = line[index...]
            // An extension may follow, after spaces or tabs (RFC 9112 §7.1.1); spaces alone may not.
            let afterSpaces = Self.trimmed(rest)
            guard rest.isEmpty || afterSpaces.first == UInt8(ascii: ";") else {
                throw .malformed("a chunk size followed by other bytes")
            }
            guard rest.allSatisfy(Self.isFieldValueByte) else {
                throw .malformed("a control byte in a chunk extension")
            }
            return size
        }
    }

    // MARK: - Bytes

    /// A `tchar` (RFC 9110 §5.6.2), looked up in a bit set of the 128 ASCII bytes.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        // Bit n of the first word: byte n; of the second, byte 64 + n.
        let tokens: (UInt64, UInt64) = (0x03ff_6cfa_0000_0000, 0x57ff_ffff_c7ff_fffe)
        switch byte {
        case 0..<64: return tokens.0 >> byte & 1 == 1
        case 64..<128: return tokens.1 >> (byte - 64) & 1 == 1
        default: return false
        }
    }

    /// A byte a field's value may hold: visible, obs-text, a space or a tab (RFC 9110 §5.5).
    private static func isFieldValueByte(_ byte: UInt8) -> Bool {
        byte >= 0x20 ? byte != 0x7F : byte == .tab
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a")) + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(byte - UInt8(ascii: "A")) + 10
        default: nil
        }
    }
}

extension UInt8 {
    fileprivate static let lineFeed = UInt8(ascii: "\n")
    fileprivate static let carriageReturn = UInt8(ascii: "\r")
    fileprivate static let space = UInt8(ascii: " ")
    fileprivate static let tab = UInt8(ascii: "\t")
}
