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
/// **Refused requests.** It answers a request the parser refused (``RequestParseError``), before
/// the connection closes, with the status the refusal names: 414 for a request line over the
/// limit, 431 for a header section over the limit, 501 for a method or a transfer coding it does
/// not know, 505 for a version other than 1.x, 400 for anything else that is not HTTP/1.1 as
/// RFC 9112 frames it (both `Content-Length` and `Transfer-Encoding`, two lengths, a
/// field line without a colon, whitespace before a colon…), so that no request can be smuggled
/// past the cache. What follows a request that closes the connection (`Connection: close`,
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
        headTimeout: TimeAmount,
        bodyIdle: TimeAmount,
        bodyTotal: TimeAmount,
        log: LoopLog,
        onBodyTimeout: ((HTTPRequestHead, _ remote: SocketAddress?, _ elapsed: TimeAmount) -> Void)?
    ) {
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

    /// Whether `request`, a `GET` or `HEAD` read whole, goes on: asked by
    /// ``ServerCodec`` as it hands requests on, so that a request answered at once crosses no
    /// handler. What is not admitted is dropped: it follows the request that closes the
    /// connection, or the body's time ran out.
    func admitsWhole(_ request: ServerRequest) -> Bool {
        guard !self.hasClosingRequestEnded else { return false }
        // What closes the connection is noted even after the body's time ran out: what follows
        // it is not a request, and gets no answer.
        if !request.isKeepAlive { self.isClosing = true }
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
        if case .request(let request) = part { return self.admitsWhole(request) }
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
        if self.hasClosingRequestEnded, error is RequestParseError { return }
        if let error = error as? RequestParseError, !self.hasUnterminatedResponse {
            let status = error.status
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

/// Closes a connection whose client stops reading (nginx's `send_timeout`): once what waits to
/// be sent has filled the channel's buffer (it is not writable), the client must take some of
/// it within `timeout`, and again within each `timeout` after, or the connection closes and
/// what waits is dropped.
///
/// It sits first in the pipeline, nearest the socket, where it sees the bytes written; the
/// bytes taken are those written less those the channel still buffers. It logs each close at
/// info through `log`, which writes off the event loop.
final class SendTimer: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let timeout: TimeAmount
    private let log: LoopLog
    /// The bytes written to the channel so far.
    private var written = 0
    /// The bytes the client had taken when the timer was armed.
    private var takenAtArming = 0
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount, log: LoopLog) {
        self.timeout = timeout
        self.log = log
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
