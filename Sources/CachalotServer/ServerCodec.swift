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
    case whole(HTTPResponseHead, body: [Data])
}

/// The server's side of HTTP/1.1 on a connection, after NIO's request parser: it hands the
/// requests on one at a time, and writes the responses' bytes. It takes the place of NIO's
/// `HTTPServerPipelineHandler` and `HTTPResponseEncoder`, one handler for both, so that a
/// response part costs one handler and a whole response one write (a hit's head, body and end
/// crossed both of them, part by part).
///
/// **Requests.** Once a request has been read to its end, nothing more is read from the
/// connection, and nothing more is handed on, until its response has ended: pipelined requests
/// (RFC 9112 §9.3.2) wait, so that responses go in the order of their requests whoever makes
/// them, and a client that pipelines cannot make the connection hold more than one read of
/// them. A parser error that follows such a request waits as well, to be answered after the
/// response. What comes after the output was closed is dropped.
///
/// **Responses.** A head is written as NIO's encoder wrote it, with the framing RFC 9112 §6
/// asks for: a response to `HEAD`, and a 1xx, 204 or 304, carries no body (a body written to
/// one fails its write); a response that may have a body keeps its
/// `Content-Length`, or, without one, is chunked for an HTTP/1.1 client and delimited by the
/// connection's close for an HTTP/1.0 one. A whole response without a `Content-Length` gets
/// one, since its body's length is known.
final class ServerCodec: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = ResponsePart
    typealias OutboundOut = IOData

    /// What came while a response was awaited, in order.
    private enum Event {
        case part(HTTPServerRequestPart)
        case error(any Error)
    }

    /// Whether a request's head has been handed on and its end has not.
    private var isRequestOpen = false
    /// Whether a request has been handed on whose response has not ended.
    private var isResponseOpen = false
    private var waiting = CircularBuffer<Event>()
    /// Whether a read was held back while requests waited.
    private var isReadHeld = false
    /// Whether ``waiting`` is being handed on: a response ended meanwhile lets the loop go on.
    private var isHandingOn = false
    private var isOutputClosed = false

    /// The methods of the requests handed on whose final response has not begun.
    private var methods = CircularBuffer<HTTPMethod>()
    /// Whether the response being written is chunked.
    private var isChunked = false
    /// Whether the response being written answers a `HEAD` (or `CONNECT`): no body goes.
    private var isBodySuppressed = false

    /// Whether the connection waits for a response before it reads or hands on anything more.
    private var isAwaitingResponse: Bool { self.isResponseOpen && !self.isRequestOpen }

    // MARK: - Requests

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.isOutputClosed else { return }
        if self.isAwaitingResponse || !self.waiting.isEmpty {
            self.waiting.append(.part(Self.unwrapInboundIn(data)))
        } else {
            self.handOn(Self.unwrapInboundIn(data), context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTPParserError, self.isAwaitingResponse || !self.waiting.isEmpty {
            self.waiting.append(.error(error))
        } else {
            self.handOn(error, context)
        }
    }

    func read(context: ChannelHandlerContext) {
        if self.isAwaitingResponse || !self.waiting.isEmpty {
            self.isReadHeld = true
        } else {
            context.read()
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.waiting.removeAll()
        context.fireChannelInactive()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .output {
            // Nothing more will be answered.
            self.isOutputClosed = true
            self.waiting.removeAll()
        }
        context.close(mode: mode, promise: promise)
    }

    private func handOn(_ part: HTTPServerRequestPart, _ context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            self.isRequestOpen = true
            self.isResponseOpen = true
            self.methods.append(head.method)
        case .body:
            break
        case .end:
            self.isRequestOpen = false
        }
        context.fireChannelRead(Self.wrapInboundOut(part))
    }

    private func handOn(_ error: any Error, _ context: ChannelHandlerContext) {
        // The answer to a request that could not be parsed is awaited as any other.
        if error is HTTPParserError, !self.isResponseOpen {
            self.isRequestOpen = false
            self.isResponseOpen = true
        }
        context.fireErrorCaught(error)
    }

    /// Hands on what waited, up to the next request whose response is to be awaited.
    private func handOnWaiting(_ context: ChannelHandlerContext) {
        guard !self.isHandingOn else { return }
        self.isHandingOn = true
        defer { self.isHandingOn = false }
        var handedOnRead = false
        while !self.isAwaitingResponse, let event = self.waiting.popFirst() {
            switch event {
            case .part(let part):
                self.handOn(part, context)
                handedOnRead = true
            case .error(let error):
                self.handOn(error, context)
            }
        }
        if handedOnRead { context.fireChannelReadComplete() }
        if self.isReadHeld, !self.isAwaitingResponse, self.waiting.isEmpty {
            self.isReadHeld = false
            context.read()
        }
    }

    // MARK: - Responses

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch Self.unwrapOutboundIn(data) {
        case .head(let head):
            var buffer = context.channel.allocator.buffer(capacity: 256)
            self.writeHead(head, bodyLength: nil, into: &buffer)
            context.write(Self.wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
        case .body(let piece):
            guard !self.isBodySuppressed else {
                promise?.fail(NIOHTTPResponseEncoderError.responseBodyNotAllowed)
                return
            }
            guard self.isChunked, piece.readableBytes > 0 else {
                context.write(Self.wrapOutboundOut(.byteBuffer(piece)), promise: promise)
                return
            }
            var size = context.channel.allocator.buffer(capacity: 16)
            size.writeString(String(piece.readableBytes, radix: 16))
            size.writeStaticString("\r\n")
            context.write(Self.wrapOutboundOut(.byteBuffer(size)), promise: nil)
            context.write(Self.wrapOutboundOut(.byteBuffer(piece)), promise: nil)
            context.write(Self.wrapOutboundOut(.byteBuffer(ByteBuffer(staticString: "\r\n"))), promise: promise)
        case .end:
            if self.isChunked {
                context.write(Self.wrapOutboundOut(.byteBuffer(ByteBuffer(staticString: "0\r\n\r\n"))), promise: promise)
            } else if let promise {
                // Written empty so that the promise completes after what went before.
                context.write(Self.wrapOutboundOut(.byteBuffer(ByteBuffer())), promise: promise)
            }
            self.endResponse(context)
        case .whole(let head, let body):
            let length = body.reduce(0) { $0 + $1.count }
            let inline = length <= Self.largestInlineBody
            var buffer = context.channel.allocator.buffer(capacity: 256 + (inline ? length : 0))
            self.writeHead(head, bodyLength: length, into: &buffer)
            if self.isBodySuppressed || length == 0 {
                context.write(Self.wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
            } else if inline {
                for piece in body { buffer.writeBytes(piece) }
                context.write(Self.wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
            } else {
                context.write(Self.wrapOutboundOut(.byteBuffer(buffer)), promise: nil)
                let buffers = body.flatMap { ByteBuffer.copies(of: $0[...]) }
                for (index, piece) in buffers.enumerated() {
                    context.write(
                        Self.wrapOutboundOut(.byteBuffer(piece)),
                        promise: index == buffers.count - 1 ? promise : nil
                    )
                }
            }
            self.endResponse(context)
        }
    }

    /// The largest body written in one buffer with its head: larger ones are not copied twice.
    static let largestInlineBody = 16 << 10

    private func endResponse(_ context: ChannelHandlerContext) {
        self.isChunked = false
        self.isBodySuppressed = false
        self.isResponseOpen = false
        self.handOnWaiting(context)
    }

    /// Writes `head` with its framing fields (see the type's description); `bodyLength` is
    /// the length of a whole response's body.
    private func writeHead(_ head: HTTPResponseHead, bodyLength: Int?, into buffer: inout ByteBuffer) {
        let code = head.status.code
        let isInterim = (100..<200).contains(code) && code != 101
        let method = isInterim ? nil : self.methods.popFirst()
        let mayHaveBody = method != .CONNECT && head.status.mayHaveResponseBody
        if !isInterim { self.isBodySuppressed = method == .HEAD || !mayHaveBody }
        var headers = head.headers
        self.isChunked = false
        if !mayHaveBody {
            headers.remove(name: "content-length")
            headers.remove(name: "transfer-encoding")
        } else if headers.contains(name: "content-length") {
            headers.remove(name: "transfer-encoding")
        } else if let bodyLength, !self.isBodySuppressed {
            headers.add(name: "Content-Length", value: String(bodyLength))
            headers.remove(name: "transfer-encoding")
        } else if head.version.major == 1, head.version.minor >= 1 {
            headers.replaceOrAdd(name: "transfer-encoding", value: "chunked")
            self.isChunked = !self.isBodySuppressed
        }
        buffer.writeStaticString("HTTP/")
        buffer.writeString(String(head.version.major))
        buffer.writeStaticString(".")
        buffer.writeString(String(head.version.minor))
        buffer.writeStaticString(" ")
        buffer.writeString(String(code))
        buffer.writeStaticString(" ")
        buffer.writeString(head.status.reasonPhrase)
        buffer.writeStaticString("\r\n")
        for (name, value) in headers {
            buffer.writeString(name)
            buffer.writeStaticString(": ")
            buffer.writeString(value)
            buffer.writeStaticString("\r\n")
        }
        buffer.writeStaticString("\r\n")
    }
}
