import Logging
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Watches each request of a connection and its response, between ``ServerCodec`` and the
/// responders: what the parser refused is answered, and each phase of reading a request is
/// bounded in time. One handler for all of it, since each response part that passes a handler
/// costs a hit a dynamic cast.
///
/// **Refused requests.** It answers a request the HTTP parser refused, before the connection
/// closes: 414 for a request line over the limit (as ``RequestLineMeter`` saw it), 431 for a
/// header section over the limit, 400 for anything else that is not HTTP/1.1 as RFC 9112 frames
/// it (both `Content-Length` and `Transfer-Encoding`, two different lengths, an unknown transfer
/// coding, a field line without a colon, whitespace before a colon…), so that no request can be
/// smuggled past the cache. It takes the place of NIO's `HTTPServerProtocolErrorHandler`, which
/// answers 400 to all. What follows a request that closes the connection (`Connection: close`,
/// or HTTP/1.0 without `keep-alive`) is not read as a request (RFC 9112 §9.6): it gets no
/// answer, and the connection closes after that request's response.
///
/// **The head.** It closes a connection whose client does not send a whole request head within
/// `headTimeout` of the connection opening or of its previous response ending: an idle
/// keep-alive connection, or a client that trickles its fields a byte at a time.
///
/// **The body.** It answers 408 and closes a connection whose client, once a request head is
/// read, does not send the next piece of the body within `bodyIdle` (nginx's
/// `client_body_timeout`), or the whole body within `bodyTotal` of the head. Once that has
/// expired, nothing more of the connection's input goes on: the connection's task sees its input
/// end before the request's end, and forwards nothing. `onBodyTimeout` is told of the request
/// (for the access log), on the event loop: it must not wait. A request without a body (its head
/// and end come in one read) arms no timer.
///
/// Each exchange only moves a deadline; one timer per connection checks the earliest when it is
/// due, and goes again for a deadline moved later.
///
/// It learns of the requests and the responses from ``ServerCodec``, which asks it whether each
/// request part goes on (``admits(_:)``, ``admitsWhole(_:)``) and tells it as each response
/// begins and ends (``responseBegan()``, ``responseEnded()``), since the codec writes them all,
/// its own included: a request answered at once, a response's parts, its flush and the next
/// read do not cross it. It stays in the pipeline for the parser's errors, the connection's
/// opening and closing, and the end of each read that handed something on.
final class RequestPhases: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ServerRequestPart
    typealias InboundOut = ServerRequestPart
    typealias OutboundOut = ResponsePart

    /// What the connection's request lines were like, for a head that overflowed.
    private let requestLines: RequestLineMeter
    private let headTimeout: TimeAmount
    private let bodyIdle: TimeAmount
    private let bodyTotal: TimeAmount
    private let log: LoopLog
    private let onBodyTimeout: ((HTTPRequestHead, _ remote: SocketAddress?, _ elapsed: TimeAmount) -> Void)?

    /// Whether a final response has begun and not ended.
    private var hasUnterminatedResponse = false
    /// Whether a request that closes the connection came.
    private var isClosing = false
    /// Whether the request that closes the connection has been read to its end: what follows
    /// is not a request.
    private var hasClosingRequestEnded = false

    /// When the connection closes unless a head comes; `nil` while a request is read or answered.
    private var headDeadline: NIODeadline?
    /// The request whose body is awaited.
    private var bodyHead: HTTPRequestHead?
    /// When the connection closes unless the body's next piece comes; `nil` but between a head
    /// and its end.
    private var bodyDeadline: NIODeadline?
    /// When the connection closes unless the body's end comes.
    private var bodyTotalDeadline = NIODeadline.distantFuture
    /// Whether a response to the request whose body is awaited has begun, ended or not: the
    /// proxy answered before the body's end (413). A second response to one request would break
    /// the connection's framing: a timeout then only closes.
    private var isAnswered = false
    private var hasBodyExpired = false

    private var timer: Scheduled<Void>?
    /// When ``timer`` fires.
    private var timerDeadline: NIODeadline?
    /// The handler's place in the pipeline, while it is in one: the responses are told of
    /// without it.
    private var context: ChannelHandlerContext?

    init(
        requestLines: RequestLineMeter,
        headTimeout: TimeAmount,
        bodyIdle: TimeAmount,
        bodyTotal: TimeAmount,
        log: LoopLog,
        onBodyTimeout: ((HTTPRequestHead, _ remote: SocketAddress?, _ elapsed: TimeAmount) -> Void)?
    ) {
        self.requestLines = requestLines
        self.headTimeout = headTimeout
        self.bodyIdle = bodyIdle
        self.bodyTotal = bodyTotal
        self.log = log
        self.onBodyTimeout = onBodyTimeout
    }

    // MARK: - Events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { self.awaitHead(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.awaitHead(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.stop()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.stop()
        self.context = nil
    }

    /// Whether a request `GET` or `HEAD` read whole, with `head`, goes on: asked by
    /// ``ServerCodec`` as it hands requests on, so that a request answered at once crosses no
    /// handler. What is not admitted is dropped: it follows the request that closes the
    /// connection, or the body's time ran out.
    func admitsWhole(_ head: HTTPRequestHead) -> Bool {
        guard !self.hasClosingRequestEnded else { return false }
        // What closes the connection is noted even after the body's time ran out: what follows
        // it is not a request, and gets no answer.
        if !head.isKeepAlive { self.isClosing = true }
        self.headDeadline = nil
        if self.isClosing { self.hasClosingRequestEnded = true }
        guard !self.hasBodyExpired else { return false }
        // No body to wait for.
        self.isAnswered = false
        self.bodyHead = nil
        self.bodyDeadline = nil
        return true
    }

    /// Whether a request's part goes on, as ``admitsWhole(_:)`` says of a whole request.
    func admits(_ part: ServerRequestPart) -> Bool {
        if case .request(let request) = part { return self.admitsWhole(request.head) }
        guard !self.hasClosingRequestEnded else { return false }
        switch part {
        case .head(let head):
            if !head.isKeepAlive { self.isClosing = true }
            self.headDeadline = nil
        case .end:
            if self.isClosing { self.hasClosingRequestEnded = true }
        case .body, .request:
            break
        }
        guard !self.hasBodyExpired else { return false }
        switch part {
        case .head(let head):
            let now = NIODeadline.now()
            self.bodyHead = head
            self.isAnswered = false
            self.bodyTotalDeadline = now + self.bodyTotal
            self.bodyDeadline = min(now + self.bodyIdle, self.bodyTotalDeadline)
        case .body:
            if self.bodyDeadline != nil { self.bodyDeadline = min(.now() + self.bodyIdle, self.bodyTotalDeadline) }
        case .end:
            self.bodyHead = nil
            self.bodyDeadline = nil
        case .request:
            break
        }
        return true
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Only now: a request whose head and end came in one read arms nothing.
        if let deadline = self.bodyDeadline { self.schedule(by: deadline, context) }
        context.fireChannelReadComplete()
    }

    /// A final response's head is being written (on the event loop, by ``ServerCodec``).
    func responseBegan() {
        self.hasUnterminatedResponse = true
        self.isAnswered = true
    }

    /// A final response's end is being written (on the event loop, by ``ServerCodec``), before
    /// its bytes go: writing it may hand this handler the next pipelined request's head at
    /// once, which must find the wait for it started, to stop it.
    func responseEnded() {
        self.hasUnterminatedResponse = false
        if let context = self.context { self.awaitHead(context) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Bytes after the last request: not a request, and not answered.
        if self.hasClosingRequestEnded, error is HTTPParserError { return }
        if let error = error as? HTTPParserError, !self.hasUnterminatedResponse {
            let status: HTTPResponseStatus =
                switch error {
                case .headerOverflow where self.requestLines.sawLongRequestLine: .uriTooLong
                case .headerOverflow: .requestHeaderFieldsTooLarge
                default: .badRequest
                }
            let headers = HTTPHeaders([("Connection", "close"), ("Content-Length", "0")])
            context.writeAndFlush(
                RequestPhases.wrapOutboundOut(
                    .whole(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers)), body: [])
                ),
                promise: nil
            )
        }
        context.fireErrorCaught(error)
    }

    // MARK: - Time

    /// Starts the wait for a request head.
    private func awaitHead(_ context: ChannelHandlerContext) {
        let deadline = NIODeadline.now() + self.headTimeout
        self.headDeadline = deadline
        self.schedule(by: deadline, context)
    }

    /// Makes sure the timer fires by `deadline`: a timer due earlier goes again when it fires.
    private func schedule(by deadline: NIODeadline, _ context: ChannelHandlerContext) {
        if let due = self.timerDeadline, due <= deadline { return }
        self.timer?.cancel()
        self.timerDeadline = deadline
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.timer = nil
            self.timerDeadline = nil
            self.check(context)
        }
    }

    /// Acts on a deadline that has passed, or waits for the earliest still ahead.
    private func check(_ context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        if let deadline = self.headDeadline, deadline <= now {
            context.close(promise: nil)
        } else if let deadline = self.bodyDeadline, deadline <= now {
            self.expireBody(context)
        } else if let next = [self.headDeadline, self.bodyDeadline].compactMap({ $0 }).min() {
            self.schedule(by: next, context)
        }
    }

    /// Answers 408, unless a response has begun, and closes.
    private func expireBody(_ context: ChannelHandlerContext) {
        self.hasBodyExpired = true
        self.bodyDeadline = nil
        self.log.log(
            .debug,
            "Closed a connection whose client did not send its request body in time",
            metadata: ["client": "\(context.channel.remoteAddress?.description ?? "?")"]
        )
        if let head = self.bodyHead, !self.isAnswered {
            self.onBodyTimeout?(head, context.channel.remoteAddress, .now() - (self.bodyTotalDeadline - self.bodyTotal))
        }
        guard !self.isAnswered else {
            context.close(promise: nil)
            return
        }
        let headers = HTTPHeaders([("Connection", "close"), ("Content-Length", "0")])
        // A client that reads no more must not hold the connection until the 408 goes: the wait
        // for a head closes it.
        self.awaitHead(context)
        let channel = context.channel
        let head = HTTPResponseHead(version: .http1_1, status: .requestTimeout, headers: headers)
        context.writeAndFlush(RequestPhases.wrapOutboundOut(.whole(.head(head), body: []))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    private func stop() {
        self.timer?.cancel()
        self.timer = nil
        self.timerDeadline = nil
        self.headDeadline = nil
        self.bodyDeadline = nil
        self.bodyHead = nil
    }
}

/// Watches the bytes a client sends, before the HTTP parser, for a request line longer than
/// `limit`: NIO's parser counts the target as a header field and reports either as too large
/// alike, and a request line over the limit is answered 414, not 431.
///
/// A request line is a line that starts with a token and a space (a method): a header field's
/// name ends at a colon, never a space. Only a read that may hold a line over the limit (the
/// line it continues counted) is read line by line, each line's first bytes until that is known
/// and the rest skipped to its end with `memchr`; of any other read, only its last line's first
/// bytes are read, found from its end. A request then costs little, and so does a body. A body
/// line that looks like a long request line would make a later overflow of the same connection
/// 414.
///
/// Not a handler of its own: ``SendTimer``, first in the pipeline, hands it each read's bytes,
/// and ``RequestPhases`` asks it which status an overflow gets.
final class RequestLineMeter {
    private let limit: Int
    /// Whether a request line longer than the limit came.
    private(set) var sawLongRequestLine = false
    /// The bytes of the current line so far.
    private var length = 0
    private var line = Line.start

    /// What the current line is, from its first bytes.
    private enum Line {
        /// Nothing read yet.
        case start
        /// Token bytes so far.
        case token
        /// A token and a space: a request line.
        case requestLine
        /// Anything else.
        case other
    }

    init(limit: Int) {
        self.limit = limit
    }

    /// Reads the bytes of one read of the connection, in order.
    func scan(_ buffer: ByteBuffer) {
        guard !self.sawLongRequestLine else { return }
        buffer.withUnsafeReadableBytes { self.scan($0) }
    }

    private func scan(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        // A read that cannot hold a line over the limit (the one it continues counted) is not
        // read line by line: only its last line's first bytes are, to know what that line is.
        guard self.length + bytes.count > self.limit else {
            // From the end: a read mostly ends a request's head, with a line break.
            var offset = bytes.count
            while offset > 0, bytes[offset - 1] != UInt8(ascii: "\n") { offset -= 1 }
            if offset > 0 {
                self.line = .start
                self.length = 0
            }
            self.length += bytes.count - offset
            var line = self.line
            while line == .start || line == .token, offset < bytes.count {
                line = Self.next(line, bytes[offset])
                offset += 1
            }
            self.line = line
            return
        }
        self.scanLines(base, bytes.count)
    }

    /// What the line is after `byte`, for a line not yet known.
    private static func next(_ line: Line, _ byte: UInt8) -> Line {
        switch line {
        case .start: Self.isTokenByte(byte) ? .token : .other
        case .token where byte == UInt8(ascii: " "): .requestLine
        case .token: Self.isTokenByte(byte) ? .token : .other
        case .requestLine, .other: line
        }
    }

    /// Reads `count` bytes at `base` line by line, each line's first bytes until it is known
    /// what the line is, and the rest of it skipped to its end with `memchr`.
    private func scanLines(_ base: UnsafeRawPointer, _ count: Int) {
        let bytes = UnsafeRawBufferPointer(start: base, count: count)
        // The state in locals while the bytes are read, stored back once.
        var line = self.line
        var length = self.length
        var sawLong = false
        var offset = 0
        while offset < bytes.count {
            if line == .requestLine || line == .other {
                // Known: the rest of the line is skipped to its end, and counted.
                let rest = bytes.count - offset
                guard let newline = memchr(base + offset, Int32(UInt8(ascii: "\n")), rest) else {
                    length += rest
                    break
                }
                let end = base.distance(to: UnsafeRawPointer(newline))
                length += end - offset
                offset = end
            }
            let byte = bytes[offset]
            offset += 1
            if byte == UInt8(ascii: "\n") {
                if line == .requestLine && length > self.limit { sawLong = true }
                line = .start
                length = 0
                continue
            }
            length += 1
            line = Self.next(line, byte)
        }
        if line == .requestLine && length > self.limit { sawLong = true }
        self.line = line
        self.length = length
        if sawLong { self.sawLongRequestLine = true }
    }

    /// A `tchar` (RFC 9110 §5.6.2), looked up in a bit set of the 128 ASCII bytes: a request's
    /// first bytes are each asked.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        // Bit n of the first word: byte n; of the second, byte 64 + n.
        let tokens: (UInt64, UInt64) = (0x03ff_6cfa_0000_0000, 0x57ff_ffff_c7ff_fffe)
        switch byte {
        case 0..<64: return tokens.0 >> byte & 1 == 1
        case 64..<128: return tokens.1 >> (byte - 64) & 1 == 1
        default: return false
        }
    }
}

/// Closes a connection whose client stops reading (nginx's `send_timeout`): once what waits to
/// be sent has filled the channel's buffer (it is not writable), the client must take some of
/// it within `timeout`, and again within each `timeout` after, or the connection closes and
/// what waits is dropped.
///
/// It sits first in the pipeline, nearest the socket, where it sees the bytes written; the
/// bytes taken are those written less those the channel still buffers. It logs each close at
/// info through `log`, which writes off the event loop.
///
/// It also hands each read's bytes to `requestLines` before they reach the HTTP
/// parser: one handler nearest the socket rather than two, since each costs every read, and its
/// end, one more step through the pipeline.
final class SendTimer: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let timeout: TimeAmount
    private let log: LoopLog
    private let requestLines: RequestLineMeter
    /// The bytes written to the channel so far.
    private var written = 0
    /// The bytes the client had taken when the timer was armed.
    private var takenAtArming = 0
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount, log: LoopLog, requestLines: RequestLineMeter) {
        self.timeout = timeout
        self.log = log
        self.requestLines = requestLines
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Through the class's name, not `Self`: through `Self`, NIO's generic helper is called
        // unspecialized, and looks the message's type up at run time (docs/performance.md).
        self.requestLines.scan(SendTimer.unwrapInboundIn(data))
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Through the class's name, not `Self`: through `Self`, NIO's generic helper is called
        // unspecialized, and looks the message's type up at run time (docs/performance.md).
        self.written &+= SendTimer.unwrapOutboundIn(data).readableBytes
        context.write(data, promise: promise)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            self.disarm()
        } else if self.timer == nil {
            self.arm(context)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.disarm()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.disarm()
    }

    /// The bytes the client has taken: written, and no longer in the channel's buffer.
    private func taken(_ context: ChannelHandlerContext) -> Int {
        let buffered = (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
        return self.written &- buffered
    }

    private func arm(_ context: ChannelHandlerContext) {
        self.takenAtArming = self.taken(context)
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: self.timeout) {
            self.timer = nil
            guard !context.channel.isWritable else { return }
            guard self.taken(context) == self.takenAtArming else { return self.arm(context) }
            self.log.log(
                .info,
                "Closed a connection whose client stopped reading",
                metadata: ["client": "\(context.channel.remoteAddress?.description ?? "?")"]
            )
            context.close(promise: nil)
        }
    }

    private func disarm() {
        self.timer?.cancel()
        self.timer = nil
    }
}
