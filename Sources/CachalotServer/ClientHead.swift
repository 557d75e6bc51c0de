import Cachalot
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1

/// A response head as the proxy writes it to its client.
///
/// First come the answer's fields as a shared cache passes them on: hop-by-hop fields removed,
/// `Accept-Ranges` on a 200 whose length is known, the proxy in `Via`. Then what changes from
/// one answer to the next: `Age` (for a stored response's head, which is kept without it),
/// `Date` if the origin sent none, and `Cache-Status`, after any from farther caches; and
/// `Connection: close` when the connection closes after it. The first part of a stored
/// response's head is made once and kept with it (``Resource/derivedFromHead(_:)``), written
/// as it goes on the wire (``writingKeptFields()``), so that a hit does not convert, filter,
/// copy nor write its fields again.
struct ClientHead: Sendable {
    var status: HTTPResponseStatus
    /// The fields a shared cache passes on, without those added for one answer.
    private let kept: HTTPHeaders
    /// ``kept`` as written on the wire, once ``writingKeptFields()`` has written them.
    private var keptWritten: ByteBuffer?
    /// What ``finish(age:cacheStatus:)`` added.
    private var added = AddedFields()
    /// The proxy's `Via` element in it: a loader's memory tier may serve servers of other names.
    let via: String
    /// Whether the head has `Date`.
    private var hasDate: Bool
    /// Whether the head has `Content-Length`.
    private(set) var hasContentLength: Bool

    /// `response`'s status and fields as the client gets them, but for what ``finish(age:cacheStatus:)`` adds.
    ///
    /// - Parameters:
    ///   - knownLength: Whether the body's length is known: a 200 then says it takes ranges.
    ///   - via: The proxy's `Via` element.
    init(_ response: HTTPResponse, knownLength: Bool, via: String) {
        var fields = ForwardedFields.removingHopByHop(response.headerFields)
        if response.status.code == 200, knownLength, !fields.contains(.acceptRanges) {
            fields[.acceptRanges] = "bytes"
        }
        fields.append(HTTPField(name: .via, value: via))
        var headers = HTTPHeaders()
        headers.reserveCapacity(fields.count + 3)
        for field in fields { headers.add(name: field.name.rawName, value: field.value) }
        self.status = HTTPResponseStatus(statusCode: response.status.code, reasonPhrase: response.status.reasonPhrase)
        self.kept = headers
        self.via = via
        self.hasDate = fields.contains(.date)
        self.hasContentLength = fields.contains(.contentLength)
    }

    /// The head with its kept fields written as they go on the wire, for a head kept for many
    /// answers: each writes them with a copy of bytes (``prepared(version:closing:)``).
    func writingKeptFields() -> ClientHead {
        var head = self
        // Sized to fit: it is kept as long as the stored response is.
        var written = ByteBuffer()
        written.reserveCapacity(self.kept.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 })
        for (name, value) in self.kept { ServerCodec.writeField(name, value, into: &written) }
        head.keptWritten = written
        return head
    }

    /// All of its fields: those kept, then those added.
    var headers: HTTPHeaders {
        var headers = self.kept
        for (name, value) in self.added.pairs { headers.add(name: name, value: value) }
        return headers
    }

    /// Adds what changes from one answer to the next: `age`, if the head is a stored
    /// response's without it, `Date` if the origin sent none, and `cacheStatus`, the last of
    /// the proxy's own fields.
    mutating func finish(age: Int?, cacheStatus: CacheStatus) {
        self.added.age = age
        if !self.hasDate {
            self.added.date = DateField.text()
            self.hasDate = true
        }
        self.added.cacheStatus = cacheStatus
    }

    /// The head as NIO writes it, for a client that spoke `version`; `closing` adds
    /// `Connection: close` (RFC 9112 §9.6).
    func nioHead(version: HTTPVersion, closing: Bool) -> HTTPResponseHead {
        var headers = self.headers
        if closing { headers.replaceOrAdd(name: "Connection", value: "close") }
        return HTTPResponseHead(version: version, status: self.status, headers: headers)
    }

    /// The head as ``ServerCodec`` writes a whole response, its kept fields written already if
    /// ``writingKeptFields()`` wrote them and its status may have a body (else its
    /// `Content-Length` may have to go); see ``nioHead(version:closing:)``.
    func head(version: HTTPVersion, closing: Bool) -> ResponseHead {
        guard let written = self.keptWritten, self.status.mayHaveResponseBody else {
            return .head(self.nioHead(version: version, closing: closing))
        }
        var added = self.added
        added.closes = closing
        return .prepared(
            PreparedHead(
                version: version,
                status: self.status,
                written: written,
                added: added,
                hasContentLength: self.hasContentLength
            )
        )
    }
}

/// The fields a head gets for one answer after those kept with it, in this order: `Age`,
/// `Date`, `Cache-Status` and `Connection: close`, each only if set. Kept as values rather than
/// as lines, so that a hit makes no list of them and writes `Age`'s digits straight.
struct AddedFields: Sendable {
    var age: Int?
    var date: String?
    var cacheStatus: CacheStatus?
    var closes = false

    /// As names and values, in order.
    var pairs: [(name: String, value: String)] {
        var pairs: [(name: String, value: String)] = []
        if let age { pairs.append(("Age", String(age))) }
        if let date { pairs.append(("Date", date)) }
        if let cacheStatus { pairs.append(("Cache-Status", cacheStatus.description)) }
        if self.closes { pairs.append(("Connection", "close")) }
        return pairs
    }

    /// The bytes ``write(into:)`` writes.
    var length: Int {
        var length = 0
        if let age { length += "Age: \r\n".utf8.count + ByteWriter.decimalLength(age) }
        if let date { length += ByteWriter.fieldLength("Date", date) }
        if let cacheStatus { length += "Cache-Status: \r\n".utf8.count + cacheStatus.length }
        if self.closes { length += "Connection: close\r\n".utf8.count }
        return length
    }

    /// Writes the field lines.
    func write(into writer: inout ByteWriter) {
        if let age {
            writer.write("Age: ")
            writer.write(decimal: age)
            writer.write("\r\n")
        }
        if let date { writer.writeField("Date", date) }
        if let cacheStatus {
            writer.write("Cache-Status: ")
            cacheStatus.write(into: &writer)
            writer.write("\r\n")
        }
        if self.closes { writer.write("Connection: close\r\n") }
    }
}

/// A stored response's ``ClientHead``, kept with it (``Resource/derivedFromHead(_:)``): a class,
/// so that each hit takes it from the stored response with one retain and a cast to a class,
/// not a copy of every field out of an existential.
final class KeptHead: Sendable {
    let head: ClientHead

    init(_ head: ClientHead) {
        self.head = head
    }
}
