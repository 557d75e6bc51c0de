import Cachalot
import NIOCore
import NIOHTTP1
import Synchronization

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
    ) async throws -> (HTTPResponseHead, OriginBody) {
        let handler = self.handler
        let exchange = OriginExchange(passesInterims: interim != nil) { [handler] demand, number in
            handler.eventLoop.execute {
                switch demand {
                case .more: handler.value.resume(number)
                case .none: handler.value.abandon(number)
                }
            }
        }
        self.channel.eventLoop.execute {
            handler.value.onReusable = onReusable
            exchange.started(as: handler.value.start(head, body: body, timeouts: timeouts, delegate: exchange))
        }
        return try await withTaskCancellationHandler {
            while true {
                switch try await exchange.nextHead() {
                case .interim(let head): await interim?(head)
                case .final(let head): return (head, OriginBody(exchange))
                }
            }
        } onCancel: {
            self.channel.close(promise: nil)
        }
    }

    /// Closes the connection.
    func close() {
        self.channel.close(promise: nil)
    }
}

/// What one exchange hands from its connection's event loop (as the delegate of its
/// ``OriginExchangeHandler``) to the task that reads it, in order: any interim heads, the final
/// head, then the body's pieces and its end; or a failure, after which nothing more. One task
/// reads it.
///
/// The body comes with back-pressure: once ``mostWaitingPieces`` pieces wait unread, the
/// connection stops reading from the origin (``OriginExchangeDelegate/exchangeDidReceiveBody(_:)``
/// answers `false`), and reads again when the reader has taken all but ``fewestWaitingPieces``.
/// A reader that goes before the end (cancelled, or its body dropped) ends the exchange, which
/// closes the connection: the rest of the body would stand before the next response.
///
/// A concrete type with one lock, where NIO's generic `NIOThrowingAsyncSequenceProducer` and an
/// `AsyncStream` for the interim heads looked their generic types up at run time several times
/// per exchange (docs/performance.md).
final class OriginExchange: OriginExchangeDelegate, Sendable {
    /// What the connection is asked to do for the reader, with the exchange's number.
    enum Demand {
        /// Read more of the body.
        case more
        /// Nothing more: the reader has gone before the end.
        case none
    }

    /// A head for the reader.
    enum Head {
        case interim(HTTPResponseHead)
        case final(HTTPResponseHead)
    }

    /// At most this many pieces wait for the reader before reading from the origin stops; up to
    /// a megabyte, at NIO's largest reads.
    static let mostWaitingPieces = 16
    /// Reading from the origin resumes once this many pieces or fewer wait.
    static let fewestWaitingPieces = 4
    /// The most interim responses passed on; an origin may send more, which are read past unseen.
    static let mostInterimResponses = 16

    private struct State {
        /// Interim heads not yet taken, then the final head until it is taken.
        var heads: [Head] = []
        /// The interim heads passed on so far.
        var interimCount = 0
        /// Pieces of the body not yet taken, from `firstPiece` on; those before it are taken,
        /// and let go (`nil`) as they are.
        var pieces: [ByteBuffer?] = []
        var firstPiece = 0
        /// How the exchange ended, once it has; a failure before the final head fails the head.
        var end: Result<Void, HTTPTransportError>?
        /// The reader, waiting for something to take.
        var waiter: UnsafeContinuation<Void, Never>?
        /// Whether the connection reads the body from the origin.
        var isReading = true
        /// Whether the reader has gone (cancelled, or its body dropped).
        var isGone = false
        /// Whether the reader's task was cancelled.
        var isCancelled = false
        /// The exchange's number on its connection, set on the event loop as the request goes.
        var number = 0

        var waitingPieces: Int { self.pieces.count - self.firstPiece }

        /// Takes the next waiting piece, if any; with `more`, reading from the origin is to resume.
        mutating func takePiece() -> (piece: ByteBuffer, more: Bool)? {
            guard self.firstPiece < self.pieces.count, let piece = self.pieces[self.firstPiece] else { return nil }
            self.pieces[self.firstPiece] = nil
            self.firstPiece += 1
            if self.firstPiece == self.pieces.count {
                self.pieces.removeAll(keepingCapacity: true)
                self.firstPiece = 0
            }
            guard !self.isReading, self.waitingPieces <= OriginExchange.fewestWaitingPieces else {
                return (piece, false)
            }
            self.isReading = true
            return (piece, true)
        }
    }

    private let state = Mutex(State())
    /// Whether the reader wants the interim heads.
    private let passesInterims: Bool
    /// Tells the connection, on its event loop, what the reader wants; given the exchange's number.
    private let demand: @Sendable (Demand, Int) -> Void

    init(passesInterims: Bool, demand: @escaping @Sendable (Demand, Int) -> Void) {
        self.passesInterims = passesInterims
        self.demand = demand
    }

    // MARK: - On the event loop

    /// The request went out as the connection's exchange `number`.
    func started(as number: Int) {
        self.state.withLock { $0.number = number }
    }

    func exchangeDidReceiveInterim(_ head: HTTPResponseHead) {
        guard self.passesInterims else { return }
        self.wake { state in
            guard state.interimCount < OriginExchange.mostInterimResponses else { return }
            state.interimCount += 1
            state.heads.append(.interim(head))
        }
    }

    func exchangeDidReceiveHead(_ head: HTTPResponseHead) {
        self.wake { $0.heads.append(.final(head)) }
    }

    /// Hands on `piece`; `false` if the connection is to stop reading, for now or (the reader
    /// has gone) for good.
    func exchangeDidReceiveBody(_ piece: ByteBuffer) -> Bool {
        var isReading = false
        self.wake { state in
            guard !state.isGone else { return }
            state.pieces.append(piece)
            if state.waitingPieces >= OriginExchange.mostWaitingPieces { state.isReading = false }
            isReading = state.isReading
        }
        return isReading
    }

    func exchangeDidFinish() {
        self.finish(.success(()))
    }

    func exchangeDidFail(_ error: HTTPTransportError) {
        self.finish(.failure(error))
    }

    /// Ends the exchange: the body is whole, or the exchange failed with `error`.
    private func finish(_ end: Result<Void, HTTPTransportError>) {
        self.wake { state in
            if state.end == nil { state.end = end }
        }
    }

    /// Changes the state and wakes the reader.
    private func wake(_ change: (inout State) -> Void) {
        let waiter = self.state.withLock { state in
            change(&state)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    // MARK: - In the reading task

    /// The next head; the final one is the last.
    ///
    /// - Throws: The `HTTPTransportError` that ended the exchange before its final head.
    func nextHead() async throws -> Head {
        while true {
            let taken: Result<Head, HTTPTransportError>? = self.state.withLock { state in
                if !state.heads.isEmpty { return .success(state.heads.removeFirst()) }
                switch state.end {
                case .failure(let error): return .failure(error)
                case .success: return .failure(HTTPTransportError(.connectionClosed, "The exchange ended unanswered."))
                case nil: return nil
                }
            }
            if let taken { return try taken.get() }
            // A cancelled task closes the connection (``OriginConnection/exchange``), which
            // fails the exchange: this wait ends.
            await self.wait { !$0.heads.isEmpty || $0.end != nil }
        }
    }

    /// The body's next piece; `nil` after the last.
    ///
    /// - Throws: The `HTTPTransportError` that broke the body, or `CancellationError` when the
    ///   reading task is cancelled while it waits.
    func nextPiece() async throws -> ByteBuffer? {
        while true {
            let (taken, more): (Result<ByteBuffer?, any Error>?, Int?) = self.state.withLock { state in
                if let (piece, more) = state.takePiece() { return (.success(piece), more ? state.number : nil) }
                switch state.end {
                case .success: return (.success(nil), nil)
                case .failure(let error): return (.failure(error), nil)
                case nil: return (state.isCancelled ? .failure(CancellationError()) : nil, nil)
                }
            }
            if let number = more { self.demand(.more, number) }
            if let taken { return try taken.get() }
            await withTaskCancellationHandler {
                await self.wait { $0.waitingPieces > 0 || $0.end != nil || $0.isCancelled }
            } onCancel: {
                self.readerLeft(isCancelled: true)
            }
        }
    }

    /// Waits for a change of the state, unless `isReady` holds already.
    private func wait(until isReady: (borrowing State) -> Bool) async {
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            // Looked at again under the lock: a change or a cancellation between the reader's
            // look and now would otherwise find no waiter to wake.
            let isReady = self.state.withLock { state in
                let isReady = isReady(state)
                if !isReady { state.waiter = continuation }
                return isReady
            }
            if isReady { continuation.resume() }
        }
    }

    /// Whether the reader waits for the loop: for tests.
    var isWaiting: Bool {
        self.state.withLock { $0.waiter != nil }
    }

    /// The reader has gone: its body was dropped, or its task cancelled. Before the end, the
    /// connection is told to stop, and a waiting reader wakes.
    func readerLeft(isCancelled: Bool = false) {
        let (waiter, unfinished) = self.state.withLock { state in
            let wasGone = state.isGone
            state.isGone = true
            state.isCancelled = state.isCancelled || isCancelled
            state.pieces = []
            state.firstPiece = 0
            defer { state.waiter = nil }
            return (state.waiter, !wasGone && state.end == nil ? state.number : nil)
        }
        waiter?.resume()
        if let number = unfinished { self.demand(.none, number) }
    }
}

/// A response body as an origin connection delivers it, read once: the connection reads from
/// the origin only while the reader keeps up (see ``OriginExchange``), and a body dropped before
/// its end closes the connection.
struct OriginBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    /// Tells the exchange when the last copy of the body, or of its iterator, is gone.
    fileprivate final class Reader: Sendable {
        let exchange: OriginExchange

        init(_ exchange: OriginExchange) {
            self.exchange = exchange
        }

        deinit {
            self.exchange.readerLeft()
        }
    }

    private let reader: Reader

    init(_ exchange: OriginExchange) {
        self.reader = Reader(exchange)
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(reader: self.reader)
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate let reader: Reader

        /// The next piece; `nil` after the last.
        ///
        /// - Throws: The `HTTPTransportError` that broke the body, or `CancellationError`.
        mutating func next() async throws -> ByteBuffer? {
            try await self.reader.exchange.nextPiece()
        }
    }
}
