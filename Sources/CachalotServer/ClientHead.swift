import Cachalot
import Foundation
import HTTPTypes
import NIOHTTP1

/// A response head as the proxy writes it to its client, in NIO's form.
///
/// First come the answer's fields as a shared cache passes them on: hop-by-hop fields removed,
/// `Accept-Ranges` on a 200 whose length is known, the proxy in `Via`. Then what changes from
/// one answer to the next: `Age` (for a stored response's head, which is kept without it),
/// `Date` if the origin sent none, and `Cache-Status`, after any from farther caches; and
/// `Connection: close` when the connection closes after it. The first part of a stored
/// response's head is made once and kept with it (``Resource/derivedFromHead(_:)``), so that a
/// hit does not convert, filter and copy its fields again.
struct ClientHead: Sendable {
    var status: HTTPResponseStatus
    var headers: HTTPHeaders
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
        self.headers = headers
        self.via = via
        self.hasDate = fields.contains(.date)
        self.hasContentLength = fields.contains(.contentLength)
    }

    /// Adds what changes from one answer to the next: `age`, if the head is a stored
    /// response's without it, `Date` if the origin sent none, and `cacheStatus`, the last of
    /// the proxy's own fields.
    mutating func finish(age: Int?, cacheStatus: String) {
        if let age { self.headers.add(name: "Age", value: String(age)) }
        if !self.hasDate {
            self.headers.add(name: "Date", value: DateField.text())
            self.hasDate = true
        }
        self.headers.add(name: "Cache-Status", value: cacheStatus)
    }

    /// The head as NIO writes it, for a client that spoke `version`; `closing` adds
    /// `Connection: close` (RFC 9112 §9.6).
    func nioHead(version: HTTPVersion, closing: Bool) -> HTTPResponseHead {
        var headers = self.headers
        if closing { headers.replaceOrAdd(name: "Connection", value: "close") }
        return HTTPResponseHead(version: version, status: self.status, headers: headers)
    }
}
