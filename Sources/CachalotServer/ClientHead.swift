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
/// as it goes on the wire (``Kept/writingFields()``), so that a hit does not convert, filter,
/// copy nor write its fields again.
struct ClientHead: Sendable {
    /// What stays the same from one answer to the next: a class, kept with a stored response
    /// (``Resource/derivedFromHead(_:)``), so that each hit takes it with one retain and a cast
    /// to a class, and copies of the head on their way copy one reference, not every field.
    final class Kept: Sendable {
        let status: HTTPResponseStatus
        /// The fields a shared cache passes on, without those added for one answer.
        let fields: HTTPHeaders
        /// ``fields`` as written on the wire, once ``writingFields()`` has written them.
        let written: ByteBuffer?
        /// The proxy's `Via` element in it: a loader's memory tier may serve servers of other names.
        let via: String
        /// Whether the head has `Date`.
        let hasDate: Bool
        /// Whether the head has `Content-Length`.
        let hasContentLength: Bool

        /// `response`'s status and fields as the client gets them.
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
            // Made as pairs: `HTTPHeaders.add` checks each name again, which are tokens already.
            let headers = HTTPHeaders(fields.map { ($0.name.rawName, $0.value) })
            self.status = HTTPResponseStatus(
                statusCode: response.status.code,
                reasonPhrase: response.status.reasonPhrase
            )
            self.fields = headers
            self.written = nil
            self.via = via
            self.hasDate = fields.contains(.date)
            self.hasContentLength = fields.contains(.contentLength)
        }

        private init(_ kept: Kept, written: ByteBuffer) {
            self.status = kept.status
            self.fields = kept.fields
            self.written = written
            self.via = kept.via
            self.hasDate = kept.hasDate
            self.hasContentLength = kept.hasContentLength
        }

        /// The same, with its fields written as they go on the wire, for a head kept for many
        /// answers: each writes them with a copy of bytes (``ClientHead/head(version:closing:)``).
        func writingFields() -> Kept {
            // Sized to fit: it is kept as long as the stored response is.
            var written = ByteBuffer()
            written.reserveCapacity(self.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 })
            for (name, value) in self.fields { ServerCodec.writeField(name, value, into: &written) }
            return Kept(self, written: written)
        }
    }

    let kept: Kept
    /// What ``finish(age:cacheStatus:)`` added.
    private var added = AddedFields()

    var status: HTTPResponseStatus { self.kept.status }
    /// The proxy's `Via` element in it.
    var via: String { self.kept.via }
    /// Whether the head has `Content-Length`.
    var hasContentLength: Bool { self.kept.hasContentLength }

    /// `response`'s status and fields as the client gets them, but for what ``finish(age:cacheStatus:)`` adds.
    ///
    /// - Parameters:
    ///   - knownLength: Whether the body's length is known: a 200 then says it takes ranges.
    ///   - via: The proxy's `Via` element.
    init(_ response: HTTPResponse, knownLength: Bool, via: String) {
        self.kept = Kept(response, knownLength: knownLength, via: via)
    }

    /// The head made of `kept`, with nothing added yet.
    init(_ kept: Kept) {
        self.kept = kept
    }

    /// All of its fields: those kept, then those added.
    var headers: HTTPHeaders {
        var headers = self.kept.fields
        for (name, value) in self.added.pairs { headers.add(name: name, value: value) }
        return headers
    }

    /// Adds what changes from one answer to the next: `age`, if the head is a stored
    /// response's without it, `Date` if the origin sent none, and `cacheStatus`, the last of
    /// the proxy's own fields.
    mutating func finish(age: Int?, cacheStatus: CacheStatus) {
        self.added.age = age
        if !self.kept.hasDate { self.added.date = DateField.text() }
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
    /// ``Kept/writingFields()`` wrote them and its status may have a body (else its
    /// `Content-Length` may have to go); see ``nioHead(version:closing:)``.
    func head(version: HTTPVersion, closing: Bool) -> ResponseHead {
        guard let written = self.kept.written, self.status.mayHaveResponseBody else {
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
