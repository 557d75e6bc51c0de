@_spi(Fuzzing) import Cachalot
import NIOCore
import NIOEmbedded
import NIOHTTP1

@_spi(Fuzzing)
extension FuzzTarget {
    /// Feeds `bytes` to an origin connection as everything its origin sends, in the pipeline
    /// ``NIOTransport`` builds (SwiftNIO's request encoder and response decoder, then
    /// ``OriginExchangeHandler``), and closes it.
    ///
    /// The first byte picks the request (bit 0: `HEAD` instead of `GET`) and the second where
    /// the rest is cut in two, to be read as two pieces. Each exchange that ends with the
    /// connection reusable starts the next at once, so that the bytes after a first response
    /// are read as the answer to a second request.
    ///
    /// Invariants:
    /// - an exchange reports interim heads with a status from 100 to 199 other than 101,
    ///   then at most one final head with a status from 200 to 999, then body pieces, then at
    ///   most one end or failure, and nothing after either;
    /// - an exchange whose head came ends or fails by the time the connection has closed;
    /// - a `HEAD` gets no body piece;
    /// - nothing traps.
    public static func originResponse(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= 2 else { return }
        let method: HTTPMethod = bytes[0] & 1 == 1 ? .HEAD : .GET
        let rest = Array(bytes[2...])
        let cut = rest.isEmpty ? 0 : Int(bytes[1]) % (rest.count + 1)

        let channel = EmbeddedChannel()
        let handler = OriginExchangeHandler()
        do {
            try channel.pipeline.syncOperations.addHandlers([
                OriginRequestEncoder(),
                ByteToMessageHandler(HTTPResponseDecoder(informationalResponseStrategy: .forward)),
                handler,
            ])
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 80)).wait()
        } catch {
            preconditionFailure("The pipeline could not be built: \(error)")
        }
        var exchanges: [RecordingExchange] = []
        let head = HTTPRequestHead(
            version: .http1_1,
            method: method,
            uri: "/",
            headers: ["Host": "origin.test"]
        )
        let timeouts = OriginExchangeHandler.Timeouts(response: .seconds(30), idle: .seconds(30))
        func startExchange() {
            guard exchanges.count < 64 else { return }
            let exchange = RecordingExchange(isHead: method == .HEAD)
            exchanges.append(exchange)
            handler.start(head, body: nil, timeouts: timeouts, delegate: exchange)
        }
        handler.onReusable = { startExchange() }
        startExchange()
        for piece in [rest[..<cut], rest[cut...]] where !piece.isEmpty {
            var buffer = channel.allocator.buffer(capacity: piece.count)
            buffer.writeBytes(piece)
            _ = try? channel.writeInbound(buffer)
        }
        _ = try? channel.close().wait()
        _ = try? channel.finish(acceptAlreadyClosed: true)
        for exchange in exchanges {
            precondition(!exchange.hasHead || exchange.hasEnded, "an exchange with a head neither ended nor failed")
        }
    }
}

/// Checks the order of what an exchange reports, for the fuzzer.
private final class RecordingExchange: OriginExchangeDelegate {
    let isHead: Bool
    private(set) var hasHead = false
    private(set) var hasEnded = false

    init(isHead: Bool) {
        self.isHead = isHead
    }

    func exchangeDidReceiveInterim(_ head: HTTPResponseHead) {
        precondition(!self.hasHead && !self.hasEnded, "an interim head after the final one")
        let code = head.status.code
        precondition(code >= 100 && code < 200 && code != 101, "an interim head with the status \(code)")
    }

    func exchangeDidReceiveHead(_ head: HTTPResponseHead) {
        precondition(!self.hasHead && !self.hasEnded, "a second final head")
        precondition((200...999).contains(head.status.code), "a final head with the status \(head.status.code)")
        self.hasHead = true
    }

    func exchangeDidReceiveBody(_ piece: ByteBuffer) -> Bool {
        precondition(self.hasHead && !self.hasEnded, "a body piece outside a body")
        precondition(!self.isHead, "a body piece in the answer to a HEAD")
        return true
    }

    func exchangeDidFinish() {
        precondition(self.hasHead && !self.hasEnded, "an end without a head, or a second end")
        self.hasEnded = true
    }

    func exchangeDidFail(_ error: HTTPTransportError) {
        precondition(!self.hasEnded, "a failure after the end")
        self.hasEnded = true
    }
}
