import NIOCore

/// A connection the listener accepted, as its task serves it: the requests its handlers hand
/// on (``next()``) and the responses the task writes (``write(contentsOf:)``), through the
/// ``ConnectionEnd`` last in its pipeline.
///
/// It takes the place of SwiftNIO's `NIOAsyncChannel`, whose generic stream and writer are
/// not specialized for our types: each request and each write looked their state machines'
/// types up at run time. Without it a stored miss takes 53.8k instructions fewer, of 563k
/// (docs/performance.md). A task on the connection's own event loop (``EventLoopExecutor``)
/// takes a part that is there, and writes while the channel is writable, without suspending;
/// any other task crosses to the loop.
///
/// A class: one released without being served (accepted in the turn in which the listener
/// closed, at shutdown) closes its channel, which no task would otherwise close.
final class AcceptedConnection: Sendable {
    let channel: any Channel
    private let end: NIOLoopBound<ConnectionEnd>

    init(_ channel: any Channel, end: ConnectionEnd) {
        self.channel = channel
        self.end = NIOLoopBound(end, eventLoop: channel.eventLoop)
    }

    deinit {
        // A connection served was closed by its task; closing it again fails, unseen.
        self.channel.close(promise: nil)
    }

    /// The next request part, or `nil` once the input has ended: the channel closed, or its
    /// handlers found an error (thrown, after the parts that came before it).
    func next() async throws -> ServerRequestPart? {
        let loop = self.channel.eventLoop
        if loop.inEventLoop, let taken = self.end.value.take() { return try taken.get() }
        let end = self.end
        return try await withUnsafeContinuation { continuation in
            if loop.inEventLoop {
                end.value.awaitPart(continuation)
            } else {
                loop.execute { end.value.awaitPart(continuation) }
            }
        }.get()
    }

    /// Writes `parts` and flushes them; returns once the channel is writable again, so that
    /// a task writes no faster than its client reads. Throws once the channel has closed.
    func write(contentsOf parts: [ResponsePart]) async throws {
        let loop = self.channel.eventLoop
        if loop.inEventLoop, try self.end.value.write(parts) { return }
        let end = self.end
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
            if loop.inEventLoop {
                end.value.awaitWritable(continuation)
            } else {
                loop.execute {
                    do {
                        if try end.value.write(parts) {
                            continuation.resume()
                        } else {
                            end.value.awaitWritable(continuation)
                        }
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            }
        }
    }

    /// Writes `part`, as ``write(contentsOf:)`` does.
    func write(_ part: ResponsePart) async throws {
        try await self.write(contentsOf: [part])
    }
}

/// The last handler of a served connection's pipeline, where its task reads the request parts
/// that the handlers before it hand on, and writes its responses, through
/// ``AcceptedConnection``. Used on its event loop only.
///
/// **Requests.** A part goes to the task waiting for one, or waits, in order, for the task to
/// ask. While ``highWatermark`` parts wait (the pieces of a request's body the task has not
/// read), the channel reads no more, until fewer than ``lowWatermark`` do: the client's bytes
/// then wait in the kernel. ``ServerCodec`` hands on one request at a time, so only a body's
/// pieces ever wait here. The input ends when the channel closes, or when an error comes
/// through the pipeline (a parse error ``RequestPhases`` answered, a reset connection): the
/// parts before it are taken first.
///
/// **Responses.** Each write goes through the handlers before this one and is flushed; a task
/// whose write leaves the channel unwritable (more than its high water mark waits for the
/// client) waits until it is writable again, or closed, which fails the wait.
final class ConnectionEnd: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ServerRequestPart
    typealias OutboundIn = ResponsePart
    typealias OutboundOut = ResponsePart

    /// How many request parts may wait before reading stops, and below how many it resumes:
    /// `NIOAsyncChannel`'s defaults.
    static let highWatermark = 10
    static let lowWatermark = 2

    private var context: ChannelHandlerContext?
    private var parts = CircularBuffer<ServerRequestPart>()
    /// Why the input ended, once it has: `nil` for the channel's close.
    private var ending: (any Error)??
    private var reader: UnsafeContinuation<Result<ServerRequestPart?, any Error>, Never>?
    /// The writes waiting for the channel to be writable: the connection's task, and an interim
    /// head's write from the flight that relays it.
    private var writers: [UnsafeContinuation<Void, any Error>] = []
    /// Whether a read was held back while ``highWatermark`` parts waited.
    private var isReadHeld = false
    private var isClosed = false

    init() {}

    // MARK: - For the connection's task

    /// A part that waits, or the input's end; `nil` if neither has come.
    func take() -> Result<ServerRequestPart?, any Error>? {
        if let part = self.parts.popFirst() {
            if self.isReadHeld, self.parts.count < Self.lowWatermark, let context = self.context {
                self.isReadHeld = false
                context.read()
            }
            return .success(part)
        }
        guard let ending = self.ending else { return nil }
        return ending.map { .failure($0) } ?? .success(nil)
    }

    /// Resumes `continuation` with the next part, or the input's end, when it comes.
    func awaitPart(_ continuation: UnsafeContinuation<Result<ServerRequestPart?, any Error>, Never>) {
        if let taken = self.take() {
            continuation.resume(returning: taken)
        } else {
            precondition(self.reader == nil, "a connection's parts are read by one task")
            self.reader = continuation
        }
    }

    /// Writes `parts` and flushes them; returns whether the channel is still writable.
    func write(_ parts: [ResponsePart]) throws -> Bool {
        guard !self.isClosed, let context = self.context else { throw ChannelError.ioOnClosedChannel }
        for part in parts {
            // Through the class's name, not `Self` (see ``ServerCodec/channelRead(context:data:)``).
            context.write(ConnectionEnd.wrapOutboundOut(part), promise: nil)
        }
        context.flush()
        return context.channel.isWritable
    }

    /// Resumes `continuation` once the channel is writable, or fails it once it has closed.
    func awaitWritable(_ continuation: UnsafeContinuation<Void, any Error>) {
        if self.isClosed || self.context == nil {
            continuation.resume(throwing: ChannelError.ioOnClosedChannel)
        } else if self.context?.channel.isWritable == true {
            continuation.resume()
        } else {
            self.writers.append(continuation)
        }
    }

    // MARK: - Events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.close()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.close()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard self.ending == nil else { return }
        let part = ConnectionEnd.unwrapInboundIn(data)
        if let reader = self.reader {
            self.reader = nil
            reader.resume(returning: .success(part))
        } else {
            self.parts.append(part)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.end(error)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, !self.writers.isEmpty {
            let writers = self.writers
            self.writers = []
            for writer in writers { writer.resume() }
        }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if self.parts.count >= Self.highWatermark {
            self.isReadHeld = true
        } else {
            context.read()
        }
    }

    /// Ends the input with `error`, or with the channel's close; the first end counts.
    private func end(_ error: (any Error)?) {
        guard self.ending == nil else { return }
        self.ending = .some(error)
        if let reader = self.reader, let taken = self.take() {
            self.reader = nil
            reader.resume(returning: taken)
        }
    }

    private func close() {
        self.end(nil)
        self.isClosed = true
        let writers = self.writers
        self.writers = []
        for writer in writers { writer.resume(throwing: ChannelError.ioOnClosedChannel) }
    }
}
