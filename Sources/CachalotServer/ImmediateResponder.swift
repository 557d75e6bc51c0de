import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1

/// Answers on the connection's event loop the requests that the cache answers at once (see
/// ``ProxyResponder/immediateResponse(to:)``), and passes the others on to the connection's
/// task, which may wait on the origin.
///
/// A hit so costs no hop to the cooperative pool and back, which costs more than the hit
/// itself. `HTTPServerPipelineHandler` before it hands over one request at a time, so answers
/// keep their order whichever path gives them.
final class ImmediateResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let responder: ProxyResponder
    private let connections: ConnectionRegistry
    /// The head of a `GET` or `HEAD` whose end has not come yet.
    private var held: HTTPRequestHead?

    init(responder: ProxyResponder, connections: ConnectionRegistry) {
        self.responder = responder
        self.connections = connections
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case .head(let head) where head.method == .GET || head.method == .HEAD:
            self.held = head
        case .head:
            context.fireChannelRead(data)
        case .body:
            // A body: not one the cache answers at once.
            self.release(context)
            context.fireChannelRead(data)
        case .end:
            if let head = self.held, !self.connections.isShuttingDown,
                let response = self.responder.immediateResponse(
                    to: ServerRequest(head: head, remote: context.channel.remoteAddress)
                )
            {
                self.held = nil
                self.write(
                    response,
                    version: head.version,
                    closing: !(response.keepsAlive && head.isKeepAlive),
                    context
                )
            } else {
                self.release(context)
                context.fireChannelRead(data)
            }
        }
    }

    /// Passes the held head on.
    private func release(_ context: ChannelHandlerContext) {
        guard let head = self.held else { return }
        self.held = nil
        context.fireChannelRead(Self.wrapInboundOut(.head(head)))
    }

    private func write(
        _ response: (head: HTTPResponse, body: [Data], keepsAlive: Bool),
        version: HTTPVersion,
        closing: Bool,
        _ context: ChannelHandlerContext
    ) {
        context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(response.head, version: version))), promise: nil)
        for piece in response.body {
            context.write(Self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: piece)))), promise: nil)
        }
        guard closing else {
            context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        let channel = context.channel
        context.writeAndFlush(Self.wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
