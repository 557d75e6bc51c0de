import Cachalot
import Foundation
import NIOCore
import NIOHTTP1

/// A response as the server's handlers and connection tasks write it to ``ServerCodec``.
enum ResponsePart: Sendable {
    /// A head, an interim (1xx) one or the final one; its framing fields are made as
    /// ``ServerCodec`` says.
    case head(HTTPResponseHead)
    /// A piece of the final response's body.
    case body(ByteBuffer)
    /// The final response's end.
    case end
    /// A whole final response: its head and its body, in hand. It goes in one write: with a
    /// small body, in one buffer.
    case whole(ResponseHead, body: [Data])
}

/// The head of a whole response.
enum ResponseHead: Sendable {
    case head(HTTPResponseHead)
    /// A head part of whose fields are written already.
    case prepared(PreparedHead)
}

/// A head whose first fields are kept written, as a stored response's are (see
/// ``ClientHead``), and written with the rest without being read again.
struct PreparedHead: Sendable {
    var version: HTTPVersion
    /// A status that may have a body, answering a `GET` or `HEAD`: the fields written cannot
    /// lose a `Content-Length`.
    var status: HTTPResponseStatus
    /// Fields written as they go on the wire, `Name: value\r\n` each; none of them
    /// `Transfer-Encoding`.
    var written: ByteBuffer
    /// The fields that follow them.
    var added: AddedFields
    /// Whether either has `Content-Length`.
    var hasContentLength: Bool
}

/// The server's side of HTTP/1.1 on a connection, after ``RequestDecoder``: it hands the
/// requests on one at a time, and writes the responses' bytes. It takes the place of NIO's
/// `HTTPServerPipelineHandler` and `HTTPResponseEncoder`, one handler for both, so that a
/// response part costs one handler and a whole response one write (a hit's head, body and end
/// crossed both of them, part by part).
///
/// **Requests.** A `GET` or `HEAD` whose end comes in the read that brought its head is read
/// whole: ``ImmediateAnswering`` is asked for its answer, which is written at once, without
/// crossing a handler (a memory hit), and without an answer it goes on whole
/// (``ServerRequestPart/request(_:)``), one part through the handlers after it rather than two;
/// the head of one whose end has not come when the read completes goes on then, alone. Each part
/// goes on only if ``RequestPhases`` admits it (see ``RequestPhases/admits(_:)``). Once
/// a request has been read to its end, nothing more is read from the
/// connection, and nothing more is handed on, until its response has ended: pipelined requests
/// (RFC 9112 §9.3.2) wait, so that responses go in the order of their requests whoever makes
/// them, and a client that pipelines cannot make the connection hold more than one read of
/// them. A parser error that follows such a request waits as well, to be answered after the
/// response. What comes after the output was closed, or after a response that closes the
/// connection (`Connection: close`, or a body that ends with it; RFC 9112 §9.6), is read and
/// dropped: it is not a request.
///
/// **Responses.** A head is written as NIO's encoder wrote it, with the framing RFC 9112 §6
/// asks for: a response to `HEAD`, and a 1xx, 204 or 304, carries no body (a body written to
/// one fails its write); a response that may have a body keeps its `Content-Length`, or,
/// without one, is chunked for an HTTP/1.1 client and delimited by the connection's close for
/// an HTTP/1.0 one. A whole response without a `Content-Length` gets one, since its body's
/// length is known. Fields are written as they are: the server makes them from
/// swift-http-types' fields and its own, whose values hold no line break.
final class ServerCodec: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = ServerRequestPart
    typealias OutboundIn = ResponsePart
    typealias OutboundOut = IOData

    /// What came while a response was awaited, in order.
    private enum Event {
        case part(HTTPServerRequestPart)
        case error(any Error)
    }

    /// Whether a request's head has been handed on and its end has not.
    private var isRequestOpen = false
    /// The head of a `GET` or `HEAD` taken from the parser, held until its end or its body comes,
    /// or the read completes.
    private var heldHead: HTTPRequestHead?
    /// Whether a request has been handed on whose response has not ended.
    private var isResponseOpen = false
    private var waiting = CircularBuffer<Event>()
    /// Whether a read was held back while requests waited.
    private var isReadHeld = false
    /// Whether ``waiting`` is being handed on: a response ended meanwhile lets the loop go on.
    private var isHandingOn = false
    /// Whether nothing more is handed on (what comes is read and dropped): the output was
    /// closed, or a response said that the connection closes after it (RFC 9112 §9.6).
    private var isDone = false
    /// Whether the response being written closes the connection after it: it says
    /// `Connection: close`, or its body ends with the connection.
    private var closesConnection = false

    /// The methods of the requests handed on whose final response has not begun.
    private var methods = CircularBuffer<HTTPMethod>()
    /// Whether the response being written is chunked.
    private var isChunked = false
    /// Whether the response being written answers a `HEAD` (or `CONNECT`): no body goes.
    private var isBodySuppressed = false

    /// Whether the connection waits for a response before it reads or hands on anything more.
    private var isAwaitingResponse: Bool { self.isResponseOpen && !self.isRequestOpen }

    /// Whether a head was written and nothing after it, nor a flush (see ``flush(context:)``).
    private var isHeadAlone = false
    /// Whether a flush was put off for a head written alone, and has not happened yet.
    private var isFlushPutOff = false

    /// Told of each final response as it begins and ends, before its bytes are written: the
    /// handler that bounds a request's phases in time sees the responses without being on
    /// their way, where each part, flush and read would cross it.
    private let phases: RequestPhases?
    /// Asked for each `GET` and `HEAD` read whole, before it is handed on: what it answers is
    /// written here, without crossing a handler (see ``ImmediateResponder``).
    private let answers: (any ImmediateAnswering)?
    /// Who the connection's requests come from, once a request has come.
    private var client: Client?
    /// Whether anything of the current read was handed on: the end of a read that went nowhere
    /// (all of it answered here) is not passed on, since the connection's task would find
    /// nothing to deliver.
    private var hasHandedOn = false

    init(phases: RequestPhases? = nil, answers: (any ImmediateAnswering)? = nil) {
        self.phases = phases
        self.answers = answers
    }

    // MARK: - Requests

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.isDone else { return }
        if self.isAwaitingResponse || !self.waiting.isEmpty {
            // Through the class's name, not `Self`: through `Self`, NIO's generic helper is called
            // unspecialized, and looks the message's type up at run time (docs/performance.md).
            self.waiting.append(.part(ServerCodec.unwrapInboundIn(data)))
        } else {
            self.handOn(ServerCodec.unwrapInboundIn(data), context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is RequestParseError, self.isAwaitingResponse || !self.waiting.isEmpty {
            self.waiting.append(.error(error))
        } else {
            self.handOn(error, context)
        }
    }

    func read(context: ChannelHandlerContext) {
        if !self.isDone, self.isAwaitingResponse || !self.waiting.isEmpty {
            self.isReadHeld = true
        } else {
            context.read()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.handOnHeldHead(context)
        self.completeRead(context)
    }

    /// Passes on a read's completion if anything of the read was handed on.
    private func completeRead(_ context: ChannelHandlerContext) {
        guard self.hasHandedOn else { return }
        self.hasHandedOn = false
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // A head whose end never came has nothing to be answered.
        self.waiting.removeAll()
        self.heldHead = nil
        context.fireChannelInactive()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if self.isFlushPutOff {
            // A head whose flush was put off goes before the output closes.
            self.isFlushPutOff = false
            context.flush()
        }
        if mode == .output {
            // Nothing more will be answered.
            self.isDone = true
            self.waiting.removeAll()
            self.heldHead = nil
        }
        context.close(mode: mode, promise: promise)
    }

    private func handOn(_ part: HTTPServerRequestPart, _ context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            self.isRequestOpen = true
            self.isResponseOpen = true
            self.methods.append(head.method)
            switch head.method {
            case .GET, .HEAD: self.heldHead = head
            default: self.handOn(.head(head), context)
            }
        case .body(let piece):
            self.handOnHeldHead(context)
            self.handOn(.body(piece), context)
        case .end:
            self.isRequestOpen = false
            if let head = self.heldHead {
                self.heldHead = nil
                self.handOnWhole(head, context)
            } else {
                self.handOn(.end, context)
            }
        }
    }

    /// Answers a `GET` or `HEAD` read whole at once, if ``answers`` can; else hands it on.
    private func handOnWhole(_ head: HTTPRequestHead, _ context: ChannelHandlerContext) {
        let client = self.client ?? Client(context.channel.remoteAddress)
        self.client = client
        var request = ServerRequest(head: head, client: client)
        guard self.phases?.admitsWhole(request) ?? true else { return }
        if let answer = self.answers?.answer(&request) {
            self.deliver(answer, context)
        } else {
            self.hasHandedOn = true
            context.fireChannelRead(ServerCodec.wrapInboundOut(.request(request)))
        }
    }

    private func handOn(_ part: ServerRequestPart, _ context: ChannelHandlerContext) {
        guard self.phases?.admits(part) ?? true else { return }
        self.hasHandedOn = true
        // Through the class's name, not `Self` (see ``channelRead(context:data:)``).
        context.fireChannelRead(ServerCodec.wrapInboundOut(part))
    }

    /// Hands on the head held, if any, alone: its body or its end is still to come.
    private func handOnHeldHead(_ context: ChannelHandlerContext) {
        guard let head = self.heldHead else { return }
        self.heldHead = nil
        self.handOn(.head(head), context)
    }

    private func handOn(_ error: any Error, _ context: ChannelHandlerContext) {
        self.handOnHeldHead(context)
        // The answer to a request that could not be parsed is awaited as any other.
        if error is RequestParseError, !self.isResponseOpen {
            self.isRequestOpen = false
            self.isResponseOpen = true
        }
        context.fireErrorCaught(error)
    }

    /// Hands on what waited, up to the next request whose response is to be awaited.
    private func handOnWaiting(_ context: ChannelHandlerContext) {
        guard !self.isHandingOn, !self.isDone else { return }
        self.isHandingOn = true
        defer { self.isHandingOn = false }
        var handedOnRead = false
        while !self.isAwaitingResponse, !self.isDone, let event = self.waiting.popFirst() {
            switch event {
            case .part(let part):
                self.handOn(part, context)
                handedOnRead = true
            case .error(let error):
                self.handOn(error, context)
            }
        }
        if handedOnRead {
            self.handOnHeldHead(context)
            self.completeRead(context)
        }
        if self.isReadHeld, !self.isAwaitingResponse, self.waiting.isEmpty {
            self.isReadHeld = false
            context.read()
        }
    }

    // MARK: - Responses

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let part = ServerCodec.unwrapOutboundIn(data)
        if case .head = part {} else { self.isHeadAlone = false }
        switch part {
        case .head(let head):
            if head.status.code >= 200 { self.phases?.responseBegan() }
            var buffer = context.channel.allocator.buffer(capacity: 256)
            self.writeHead(head, bodyLength: nil, into: &buffer)
            context.write(ServerCodec.wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
            self.isHeadAlone = true
        case .body(let piece):
            guard !self.isBodySuppressed else {
                promise?.fail(NIOHTTPResponseEncoderError.responseBodyNotAllowed)
                return
            }
            guard self.isChunked, piece.readableBytes > 0 else {
                context.write(ServerCodec.wrapOutboundOut(.byteBuffer(piece)), promise: promise)
                return
            }
            var size = context.channel.allocator.buffer(capacity: 16)
            size.writeString(String(piece.readableBytes, radix: 16))
            size.writeStaticString("\r\n")
            context.write(ServerCodec.wrapOutboundOut(.byteBuffer(size)), promise: nil)
            context.write(ServerCodec.wrapOutboundOut(.byteBuffer(piece)), promise: nil)
            context.write(ServerCodec.wrapOutboundOut(.byteBuffer(ByteBuffer(staticString: "\r\n"))), promise: promise)
        case .end:
            self.phases?.responseEnded()
            if self.isChunked {
                context.write(
                    ServerCodec.wrapOutboundOut(.byteBuffer(ByteBuffer(staticString: "0\r\n\r\n"))),
                    promise: promise
                )
            } else if let promise {
                // Written empty so that the promise completes after what went before.
                context.write(ServerCodec.wrapOutboundOut(.byteBuffer(ByteBuffer())), promise: promise)
            }
            self.endResponse(context)
        case .whole(let head, let body):
            self.writeWhole(head, body: body, promise: promise, flushing: false, context)
        }
    }

    /// Writes `answer`, an answer given at once, and flushes it; closes the connection after it
    /// if it says so.
    private func deliver(_ answer: ImmediateAnswer, _ context: ChannelHandlerContext) {
        self.isHeadAlone = false
        // Flushed here, with what a flush put off was to send.
        self.isFlushPutOff = false
        if answer.closing {
            let channel = context.channel
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.whenComplete { _ in channel.close(promise: nil) }
            self.writeWhole(answer.head, body: answer.body, promise: written, flushing: true, context)
        } else {
            self.writeWhole(answer.head, body: answer.body, promise: nil, flushing: true, context)
        }
    }

    /// Writes a whole response in one write: with a small body, in one buffer. With `flushing`,
    /// its last buffer goes with a flush, in one pass through the handlers before this one.
    private func writeWhole(
        _ head: ResponseHead,
        body: [Data],
        promise: EventLoopPromise<Void>?,
        flushing: Bool,
        _ context: ChannelHandlerContext
    ) {
        self.phases?.responseBegan()
        self.phases?.responseEnded()
        let length = body.reduce(0) { $0 + $1.count }
        let inline = length <= Self.largestInlineBody
        var buffer: ByteBuffer
        switch head {
        case .head(let head):
            buffer = context.channel.allocator.buffer(capacity: 256 + (inline ? length : 0))
            self.writeHead(head, bodyLength: length, into: &buffer)
        case .prepared(let head):
            let lines = self.lines(of: head, bodyLength: length)
            buffer = context.channel.allocator.buffer(capacity: lines.count + (inline ? length : 0))
            Self.write(lines, into: &buffer)
        }
        let ends = self.isBodySuppressed || length == 0 || inline
        if inline, !self.isBodySuppressed {
            for piece in body { buffer.writeBytes(piece) }
        }
        Self.write(buffer, promise: ends ? promise : nil, flushing: ends && flushing, context)
        if !ends {
            let buffers = body.map { ByteBuffer(borrowing: $0) }
            for (index, piece) in buffers.enumerated() {
                let isLast = index == buffers.count - 1
                Self.write(piece, promise: isLast ? promise : nil, flushing: isLast && flushing, context)
            }
        }
        self.endResponse(context)
    }

    private static func write(
        _ buffer: ByteBuffer,
        promise: EventLoopPromise<Void>?,
        flushing: Bool,
        _ context: ChannelHandlerContext
    ) {
        if flushing {
            context.writeAndFlush(ServerCodec.wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
        } else {
            context.write(ServerCodec.wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
        }
    }

    /// Flushes what was written, but for a head written alone, whose flush waits until the
    /// event loop has run what it had queued: an origin's head and the first piece of its body
    /// mostly come in one read, and the piece reaches the connection's task in those jobs. The
    /// piece's flush then sends both in one write, which wakes the client once, not twice. If
    /// no piece comes by then (a slow origin), the head goes alone, as before.
    func flush(context: ChannelHandlerContext) {
        if self.isHeadAlone {
            self.isHeadAlone = false
            guard !self.isFlushPutOff else { return }
            self.isFlushPutOff = true
            context.eventLoop.assumeIsolated().execute {
                guard self.isFlushPutOff else { return }
                self.isFlushPutOff = false
                context.flush()
            }
        } else {
            self.isFlushPutOff = false
            context.flush()
        }
    }

    /// The largest body written in one buffer with its head: larger ones are not copied twice.
    static let largestInlineBody = 16 << 10

    private func endResponse(_ context: ChannelHandlerContext) {
        self.isChunked = false
        self.isBodySuppressed = false
        self.isResponseOpen = false
        if self.closesConnection {
            // What follows is not a request: it is read and dropped until the connection closes,
            // so that bytes left unread do not make the close reset the connection (RFC 9112
            // §9.6), which could lose the response.
            self.isDone = true
            self.waiting.removeAll()
            if self.isReadHeld {
                self.isReadHeld = false
                context.read()
            }
        }
        self.handOnWaiting(context)
    }

    /// How a response is framed (RFC 9112 §6).
    private enum Framing {
        /// No body: no `Content-Length` nor `Transfer-Encoding` either.
        case bodiless
        /// By the `Content-Length` it has; a `Transfer-Encoding` goes.
        case length
        /// By a `Content-Length` to add.
        case addedLength(Int)
        /// Chunked: `Transfer-Encoding: chunked` goes in.
        case chunked
        /// By the connection's close (HTTP/1.0).
        case close
    }

    /// The framing of a head with `status`, for the request it answers; `bodyLength` is the
    /// length of a whole response's body; `saysClose`, whether the head has `Connection: close`.
    /// Notes whether a body goes, whether it is chunked, and whether the connection closes after.
    private func framing(
        _ status: HTTPResponseStatus,
        _ version: HTTPVersion,
        hasLength: Bool,
        bodyLength: Int?,
        saysClose: Bool
    )
        -> Framing
    {
        let code = status.code
        let isInterim = (100..<200).contains(code) && code != 101
        let method = isInterim ? nil : self.methods.popFirst()
        let isConnect = if case .CONNECT? = method { true } else { false }
        let mayHaveBody = !isConnect && status.mayHaveResponseBody
        if !isInterim { self.isBodySuppressed = method?.isHead == true || !mayHaveBody }
        let framing: Framing =
            if !mayHaveBody {
                .bodiless
            } else if hasLength {
                .length
            } else if let bodyLength, !self.isBodySuppressed {
                .addedLength(bodyLength)
            } else if version.major == 1, version.minor >= 1 {
                .chunked
            } else {
                .close
            }
        if case .chunked = framing { self.isChunked = !self.isBodySuppressed } else { self.isChunked = false }
        if !isInterim, case .close = framing, !self.isBodySuppressed { self.closesConnection = true }
        if !isInterim, saysClose { self.closesConnection = true }
        return framing
    }

    /// Writes `head` with its framing fields (see the type's description); `bodyLength` is
    /// the length of a whole response's body.
    private func writeHead(_ head: HTTPResponseHead, bodyLength: Int?, into buffer: inout ByteBuffer) {
        // Changed only where the framing asks: a change copies the fields.
        var headers = head.headers
        let hasLength = headers.contains(name: "content-length")
        let hasCoding = headers.contains(name: "transfer-encoding")
        let saysClose = headers["connection"].contains { ForwardedFields.connectionOptions($0).contains("close") }
        switch self.framing(
            head.status,
            head.version,
            hasLength: hasLength,
            bodyLength: bodyLength,
            saysClose: saysClose
        ) {
        case .bodiless:
            if hasLength { headers.remove(name: "content-length") }
            if hasCoding { headers.remove(name: "transfer-encoding") }
        case .length:
            if hasCoding { headers.remove(name: "transfer-encoding") }
        case .addedLength(let length):
            if hasCoding { headers.remove(name: "transfer-encoding") }
            headers.add(name: "Content-Length", value: String(length))
        case .chunked:
            headers.replaceOrAdd(name: "transfer-encoding", value: "chunked")
        case .close:
            break
        }
        // Counted, then written in one write: each write to a buffer checks its room and its
        // ownership again.
        let statusLine = Self.statusLine(head.version, head.status)
        var count = (statusLine?.utf8.count ?? Self.okStatusLine.utf8CodeUnitCount) + 2
        for (name, value) in headers { count += ByteWriter.fieldLength(name, value) }
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { target in
            var writer = ByteWriter(UnsafeMutableRawBufferPointer(rebasing: target[..<count]))
            if let statusLine { writer.write(statusLine) } else { writer.write(Self.okStatusLine) }
            for (name, value) in headers { writer.writeField(name, value) }
            writer.write("\r\n")
            return writer.count
        }
    }

    /// The status line for `version` and `status`, unless it is `HTTP/1.1 200 OK`.
    private static func statusLine(_ version: HTTPVersion, _ status: HTTPResponseStatus) -> String? {
        version == .http1_1 && status == .ok
            ? nil : "HTTP/\(version.major).\(version.minor) \(status.code) \(status.reasonPhrase)\r\n"
    }

    /// A prepared head's bytes, counted before they are written.
    private struct PreparedLines {
        var head: PreparedHead
        /// Its status line, unless it is `HTTP/1.1 200 OK`.
        var statusLine: String?
        /// The framing field the head lacks, if any.
        var framingField: (name: String, value: String)?
        var count: Int
    }

    /// `head`'s lines: the status line, the fields written already, then the others, then its
    /// framing field; counted, so that they go in one write to a buffer made to fit.
    private func lines(of head: PreparedHead, bodyLength: Int?) -> PreparedLines {
        let framing = self.framing(
            head.status,
            head.version,
            hasLength: head.hasContentLength,
            bodyLength: bodyLength,
            saysClose: head.added.closes
        )
        let framingField: (name: String, value: String)? =
            switch framing {
            case .addedLength(let length): ("Content-Length", String(length))
            case .chunked: ("transfer-encoding", "chunked")
            // A prepared head has a status that may have a body, and no `Transfer-Encoding`.
            case .bodiless, .length, .close: nil
            }
        let statusLine = Self.statusLine(head.version, head.status)
        var count = (statusLine?.utf8.count ?? Self.okStatusLine.utf8CodeUnitCount) + head.written.readableBytes + 2
        count += head.added.length
        if let (name, value) = framingField { count += ByteWriter.fieldLength(name, value) }
        return PreparedLines(head: head, statusLine: statusLine, framingField: framingField, count: count)
    }

    private static let okStatusLine: StaticString = "HTTP/1.1 200 OK\r\n"

    /// Writes `lines` in one write: each write to a buffer checks its room and its ownership.
    private static func write(_ lines: PreparedLines, into buffer: inout ByteBuffer) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: lines.count) { target in
            var writer = ByteWriter(target)
            if let statusLine = lines.statusLine { writer.write(statusLine) } else { writer.write(Self.okStatusLine) }
            lines.head.written.withUnsafeReadableBytes { writer.write($0) }
            lines.head.added.write(into: &writer)
            if let (name, value) = lines.framingField { writer.writeField(name, value) }
            writer.write("\r\n")
            return writer.count
        }
    }

    /// Writes a field line, `name: value\r\n`.
    static func writeField(_ name: String, _ value: String, into buffer: inout ByteBuffer) {
        buffer.writeString(name)
        buffer.writeStaticString(": ")
        buffer.writeString(value)
        buffer.writeStaticString("\r\n")
    }
}
