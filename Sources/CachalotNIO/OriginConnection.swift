import Cachalot
import NIOCore
import NIOHTTP1

/// One kept-alive HTTP/1.1 connection to an origin, which serves one exchange at a time.
final class OriginConnection: Sendable {
    let channel: any Channel
    private let handler: NIOLoopBound<OriginExchangeHandler>

    /// Wraps `channel`, whose pipeline ends in `handler`; call on the channel's event loop.
    init(channel: any Channel, handler: OriginExchangeHandler) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
    }

    /// Whether the connection may take an exchange: open, and none in progress. On any thread,
    /// so only a hint; ``exchange(_:body:timeouts:interim:onReusable:)`` fails at once on a connection
    /// that turns out closed.
    var isOpen: Bool { self.channel.isActive }

    /// Sends `head` and `body` and returns the final response's head and its body as it
    /// arrives. `onReusable` is called once the body has ended on a connection that can take
    /// another exchange.
    ///
    /// Cancelling the calling task before the head arrives closes the connection. The body must
    /// be read to its end, or dropped: a body dropped early closes the connection.
    func exchange(
        _ head: HTTPRequestHead,
        body: ByteBuffer?,
        timeouts: OriginExchangeHandler.Timeouts,
        interim: (@Sendable (HTTPResponseHead) async -> Void)?,
        onReusable: @escaping @Sendable () -> Void
    ) async throws -> (HTTPResponseHead, ResponseBodyStream) {
        let promise = self.channel.eventLoop.makePromise(of: (HTTPResponseHead, ResponseBodyStream).self)
        let handler = self.handler
        // Interim heads come before the final one; they wait here, in order, to be handed on.
        let (interims, arriving) = AsyncStream.makeStream(
            of: HTTPResponseHead.self,
            bufferingPolicy: .bufferingOldest(ExchangeBridge.mostInterimResponses)
        )
        promise.futureResult.whenComplete { _ in arriving.finish() }
        self.channel.eventLoop.execute {
            let bridge = ExchangeBridge(promise: promise, handler: handler)
            if interim != nil { bridge.onInterim = { arriving.yield($0) } }
            handler.value.onReusable = onReusable
            bridge.number = handler.value.start(head, body: body, timeouts: timeouts, delegate: bridge)
        }
        return try await withTaskCancellationHandler {
            for await head in interims { await interim?(head) }
            return try await promise.futureResult.get()
        } onCancel: {
            self.channel.close(promise: nil)
        }
    }

    /// Closes the connection.
    func close() {
        self.channel.close(promise: nil)
    }
}

/// A response body as an origin connection delivers it, with back-pressure: the connection
/// reads from the origin only while the reader keeps up.
typealias ResponseBodyStream = NIOThrowingAsyncSequenceProducer<
    ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, ExchangeBridge.Demand
>

/// Carries one exchange from the event loop to the task that awaits it: the head through a
/// promise, the body through a ``ResponseBodyStream``. Lives on the connection's event loop.
final class ExchangeBridge: OriginExchangeDelegate {
    private var promise: EventLoopPromise<(HTTPResponseHead, ResponseBodyStream)>?
    private var source: ResponseBodyStream.Source?
    private let handler: NIOLoopBound<OriginExchangeHandler>
    var number = 0
    /// Receives the interim heads, if anyone wants them; at most ``mostInterimResponses`` of them.
    var onInterim: ((HTTPResponseHead) -> Void)?
    private var interimCount = 0

    /// The most interim responses passed on for one exchange; an origin may send more, which
    /// are read past unseen.
    static let mostInterimResponses = 16

    init(
        promise: EventLoopPromise<(HTTPResponseHead, ResponseBodyStream)>,
        handler: NIOLoopBound<OriginExchangeHandler>
    ) {
        self.promise = promise
        self.handler = handler
    }

    func exchangeDidReceiveInterim(_ head: HTTPResponseHead) {
        guard self.interimCount < Self.mostInterimResponses else { return }
        self.interimCount += 1
        self.onInterim?(head)
    }

    func exchangeDidReceiveHead(_ head: HTTPResponseHead) {
        // Up to 16 pieces (a megabyte at most) wait for the reader; reading resumes below 4.
        let made = ResponseBodyStream.makeSequence(
            backPressureStrategy: .init(lowWatermark: 4, highWatermark: 16),
            finishOnDeinit: false,
            delegate: Demand(handler: self.handler, number: self.number)
        )
        self.source = made.source
        self.promise?.succeed((head, made.sequence))
        self.promise = nil
    }

    func exchangeDidReceiveBody(_ piece: ByteBuffer) -> Bool {
        switch self.source?.yield(piece) {
        case .produceMore: return true
        case .stopProducing: return false
        case .dropped, nil:
            // The reader has gone: the rest of the body is nobody's.
            self.handler.value.abandon(self.number)
            return false
        }
    }

    func exchangeDidFinish() {
        self.source?.finish()
        self.source = nil
    }

    func exchangeDidFail(_ error: HTTPTransportError) {
        self.promise?.fail(error)
        self.promise = nil
        self.source?.finish(error)
        self.source = nil
    }

    /// Tells the connection, on its event loop, that the reader wants more, or has gone.
    struct Demand: NIOAsyncSequenceProducerDelegate {
        let handler: NIOLoopBound<OriginExchangeHandler>
        let number: Int

        func produceMore() {
            let handler = self.handler
            let number = self.number
            handler.eventLoop.execute { handler.value.resume(number) }
        }

        func didTerminate() {
            let handler = self.handler
            let number = self.number
            handler.eventLoop.execute { handler.value.abandon(number) }
        }
    }
}
