import Cachalot
import NIOCore
import NIOHTTP1

/// What one exchange with an origin reports, on the connection's event loop, in order: any
/// number of interim heads (1xx), then the final head, its body in pieces and its end; or a
/// failure at any point, after which nothing more.
protocol OriginExchangeDelegate: AnyObject {
    /// An interim response (100, 102, 103…): not the answer, which is still to come.
    func exchangeDidReceiveInterim(_ head: HTTPResponseHead)
    /// The final response's head, with a status from 200 to 999.
    func exchangeDidReceiveHead(_ head: HTTPResponseHead)
    /// A piece of the body; `false` to stop reading from the origin until
    /// ``OriginExchangeHandler/resume(_:)``.
    func exchangeDidReceiveBody(_ piece: ByteBuffer) -> Bool
    /// The body is complete.
    func exchangeDidFinish()
    /// The exchange failed; the connection is closed.
    func exchangeDidFail(_ error: HTTPTransportError)
}

/// The last handler of an origin connection: sends one request at a time and hands what comes
/// back to the exchange's delegate, judged before anyone else sees it.
///
/// Every byte an origin sends ends in one of three ways: an interim head passed on, a response
/// passed on, or an `HTTPTransportError` for that one exchange and a closed connection. A
/// status below 100 (whose framing HTTP does not define), an unasked switch of protocols, a
/// response nobody asked for, and every framing or syntax error SwiftNIO's decoder reports
/// become `invalidResponse`. Nothing an origin sends reaches a `precondition`.
///
/// Reading is driven by demand (the channel's `autoRead` is off): the handler reads while a
/// head is awaited, while the delegate takes body pieces, and while the connection idles in a
/// pool, so that an origin's close is noticed there. Two clocks bound an exchange: the whole
/// head must arrive within `responseTimeout` of the request, and while more of the body is
/// owed, the origin may stay silent no longer than `idleTimeout`. Time the delegate's reader
/// spends not asking for more is not counted against the origin.
final class OriginExchangeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    struct Timeouts {
        var response: TimeAmount
        var idle: TimeAmount
    }

    private enum State {
        /// No exchange: new, or back in a pool.
        case idle
        /// The request went out; the final head has not come.
        case awaitingHead(any OriginExchangeDelegate)
        /// The final head came; its body is being read. `isReusable`: the connection may serve
        /// another exchange after the end.
        case body(any OriginExchangeDelegate, isReusable: Bool)
        case closed
    }

    private var state = State.idle
    private var context: ChannelHandlerContext?
    /// Increases with every exchange, so that a late word about an earlier one is ignored.
    private(set) var exchangeNumber = 0
    private var timeouts = Timeouts(response: .seconds(30), idle: .seconds(30))
    /// Whether the delegate wants more of the body (or the head is awaited).
    private var wantsData = true
    /// Whether any byte of the present exchange's response has come.
    private var hasReceived = false
    private var lastActivity = NIODeadline.now()
    private var responseTimer: Scheduled<Void>?
    private var idleTimer: Scheduled<Void>?
    /// Called on the event loop when an exchange ended and the connection can take another.
    var onReusable: (() -> Void)?
    /// The error that closed the connection between exchanges, such as a failed TLS handshake.
    private var idleError: (any Error)?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.cancelTimers()
        // It holds the connection that holds this handler: the cycle ends with the channel.
        self.onReusable = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        // Read while idle, to notice the origin's close.
        context.read()
        context.fireChannelActive()
    }

    // MARK: - Starting and steering an exchange

    /// Sends `head` and `body` and reports what comes back to `delegate`, which must not be
    /// used for another exchange. Returns the exchange's number, for ``resume(_:)`` and
    /// ``abandon(_:)``.
    @discardableResult
    func start(
        _ head: HTTPRequestHead,
        body: ByteBuffer?,
        timeouts: Timeouts,
        delegate: any OriginExchangeDelegate
    ) -> Int {
        self.exchangeNumber += 1
        guard case .idle = self.state, let context = self.context, context.channel.isActive else {
            if self.exchangeNumber == 1, let error = self.idleError {
                // A new connection that failed before its first request: TLS, most likely.
                delegate.exchangeDidFail(
                    HTTPTransportError(
                        .connectFailed,
                        "The connection to the origin failed before the request: \(error).",
                        underlying: error
                    )
                )
            } else {
                delegate.exchangeDidFail(Self.stale("The kept connection to the origin was closed."))
            }
            return self.exchangeNumber
        }
        self.state = .awaitingHead(delegate)
        self.timeouts = timeouts
        self.wantsData = true
        self.hasReceived = false
        self.lastActivity = .now()
        // Through the class's name, not `Self`: through `Self`, NIO's generic helper is called
        // unspecialized, and looks the message's type up at run time (docs/performance.md).
        context.write(OriginExchangeHandler.wrapOutboundOut(.head(head)), promise: nil)
        if let body { context.write(OriginExchangeHandler.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        let number = self.exchangeNumber
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(OriginExchangeHandler.wrapOutboundOut(.end(nil)), promise: written)
        written.futureResult.assumeIsolated().whenFailure { [weak self] error in
            guard let self, self.exchangeNumber == number else { return }
            let message = "The request could not be sent: \(error)."
            self.fail(
                self.hasReceived
                    ? HTTPTransportError(.connectionClosed, message, underlying: error) : Self.stale(message)
            )
        }
        self.responseTimer = context.eventLoop.assumeIsolated().scheduleTask(in: timeouts.response) { [weak self] in
            guard let self, self.exchangeNumber == number, case .awaitingHead = self.state else { return }
            self.fail(HTTPTransportError(.responseTimeout, "The origin sent no whole response head in time."))
        }
        context.read()
        return number
    }

    /// The delegate wants more of exchange `number`'s body.
    func resume(_ number: Int) {
        guard number == self.exchangeNumber, case .body = self.state, !self.wantsData else { return }
        self.wantsData = true
        self.lastActivity = .now()
        self.armIdleTimer()
        self.context?.read()
    }

    /// The delegate no longer wants exchange `number`'s body: the connection closes if that
    /// body is still being read, since the rest of it would stand before the next response.
    func abandon(_ number: Int) {
        guard number == self.exchangeNumber else { return }
        switch self.state {
        case .awaitingHead, .body:
            self.state = .closed
            self.cancelTimers()
            self.context?.close(promise: nil)
        case .idle, .closed:
            break
        }
    }

    // MARK: - What the origin sends

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.hasReceived = true
        self.lastActivity = .now()
        switch (OriginExchangeHandler.unwrapInboundIn(data), self.state) {
        case (.head(let head), .awaitingHead(let delegate)):
            let code = head.status.code
            if code >= 100 && code < 200 && code != 101 {
                delegate.exchangeDidReceiveInterim(head)
                return
            }
            guard code >= 200 else {
                let what = code == 101 ? "switched protocols unasked" : "answered with the status \(code)"
                self.fail(HTTPTransportError(.invalidResponse, "The origin \(what); no response can be made of it."))
                return
            }
            self.responseTimer?.cancel()
            self.responseTimer = nil
            self.state = .body(delegate, isReusable: head.isKeepAlive)
            self.armIdleTimer()
            delegate.exchangeDidReceiveHead(head)
        case (.body(let piece), .body(let delegate, _)):
            if !delegate.exchangeDidReceiveBody(piece) { self.wantsData = false }
        case (.end, .body(let delegate, let isReusable)):
            self.cancelTimers()
            let isOpen = isReusable && context.channel.isActive
            self.state = isOpen ? .idle : .closed
            self.wantsData = true
            // Back in the pool before the reader hears of the end: a reader that sends its
            // next request at once finds the connection there.
            if isOpen { self.onReusable?() } else { context.close(promise: nil) }
            delegate.exchangeDidFinish()
        case (_, .idle):
            self.fail(HTTPTransportError(.invalidResponse, "The origin sent a response nobody asked for."))
        case (_, .closed):
            break
        case (.head, .body), (.body, .awaitingHead), (.end, .awaitingHead):
            // The decoder frames one message at a time; anything else is a broken origin.
            self.fail(HTTPTransportError(.invalidResponse, "The origin's response is out of order."))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        switch self.state {
        case .idle, .awaitingHead:
            context.read()
        case .body:
            if self.wantsData { context.read() }
        case .closed:
            break
        }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if case .idle = self.state { self.idleError = error }
        let code: HTTPTransportError.Code =
            error is HTTPParserError || error is NIOHTTPDecoderError ? .invalidResponse : .connectionClosed
        if !self.hasReceived, code == .connectionClosed, case .awaitingHead = self.state {
            self.fail(Self.stale("The connection to the origin broke before any answer: \(error).", underlying: error))
        } else {
            self.fail(HTTPTransportError(code, "The origin's response could not be read: \(error).", underlying: error))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !self.hasReceived, case .awaitingHead = self.state {
            self.fail(Self.stale("The origin closed the connection before any answer."))
        } else {
            self.fail(
                HTTPTransportError(.connectionClosed, "The origin closed the connection before the response ended.")
            )
        }
        self.state = .closed
        self.onReusable = nil
        context.fireChannelInactive()
    }

    // MARK: - Ending

    /// Ends the present exchange, if any, with `error`, and closes the connection.
    private func fail(_ error: HTTPTransportError) {
        let delegate: (any OriginExchangeDelegate)?
        switch self.state {
        case .awaitingHead(let current), .body(let current, _):
            delegate = current
        case .idle, .closed:
            delegate = nil
        }
        self.state = .closed
        self.cancelTimers()
        self.context?.close(promise: nil)
        delegate?.exchangeDidFail(error)
    }

    /// The mark of a connection that failed before its origin sent a byte, the way a pooled
    /// connection fails that the origin closed as the request went out: such a request may be
    /// sent again on a new connection.
    struct StaleConnection: Error {}

    static func stale(_ message: String, underlying: (any Error)? = nil) -> HTTPTransportError {
        HTTPTransportError(.connectionClosed, message, underlying: underlying ?? StaleConnection())
    }

    // MARK: - The idle clock

    /// Arms the idle timer unless it is armed: when it fires, the origin has owed data for
    /// `idle` with nothing sent, or the deadline moves on.
    private func armIdleTimer() {
        guard self.idleTimer == nil, let context = self.context else { return }
        let number = self.exchangeNumber
        self.idleTimer = context.eventLoop.assumeIsolated().scheduleTask(
            deadline: self.lastActivity + self.timeouts.idle
        ) {
            [weak self] in
            guard let self, self.exchangeNumber == number else { return }
            self.idleTimer = nil
            switch self.state {
            case .body:
                guard self.wantsData else { return }  // re-armed by `resume`
                if NIODeadline.now() >= self.lastActivity + self.timeouts.idle {
                    self.fail(HTTPTransportError(.idleTimeout, "The origin sent nothing for too long."))
                } else {
                    self.armIdleTimer()
                }
            case .idle, .awaitingHead, .closed:
                break
            }
        }
    }

    private func cancelTimers() {
        self.responseTimer?.cancel()
        self.responseTimer = nil
        self.idleTimer?.cancel()
        self.idleTimer = nil
    }
}
