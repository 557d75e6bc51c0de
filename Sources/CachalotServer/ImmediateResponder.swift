import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1

/// Takes each `GET` and `HEAD` without a body whole on the connection's event loop
/// (``RequestPart/whole(_:)``, as ``ServerCodec`` hands it on) and prepares it once: answers
/// there what the cache answers at once (see ``ProxyResponder/prepare(_:memo:)``), and hands
/// the others on to the connection's task, prepared, as ``ServerRequestPart/request(_:)``.
/// Other requests go on in parts, which the task reads with its limits.
///
/// A hit so never goes through the connection's task (when that task ran on the cooperative
/// pool, the hop there and back cost more than the hit itself), and a miss is not converted,
/// keyed and looked up in memory a second time.
/// ``ServerCodec`` before it hands over one request at a time, so answers keep their order
/// whichever path gives them; a hit goes to it whole (``ResponsePart/whole(_:body:)``).
/// Without a responder (the admin listener), it answers nothing itself.
final class ImmediateResponder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = RequestPart
    typealias InboundOut = ServerRequestPart
    typealias OutboundOut = ResponsePart

    private let responder: ProxyResponder?
    private let connections: ConnectionRegistry
    /// Who the connection's requests come from, once a request has come.
    private var client: Client?
    /// The connection's last request for the origin, made on this loop.
    private var upstream: ProxyResponder.UpstreamMemo?

    init(responder: ProxyResponder?, connections: ConnectionRegistry) {
        self.responder = responder
        self.connections = connections
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Through the class's name, not `Self`: through `Self`, NIO's generic helper is called
        // unspecialized, and looks the message's type up at run time (docs/performance.md).
        switch ImmediateResponder.unwrapInboundIn(data) {
        case .whole(let head):
            let client = self.client ?? Client(context.channel.remoteAddress)
            self.client = client
            var request = ServerRequest(head: head, client: client)
            if let responder = self.responder, !self.connections.isShuttingDown,
                let response = responder.prepare(&request, memo: &self.upstream)
            {
                self.write(
                    response,
                    version: head.version,
                    closing: !(response.keepsAlive && head.isKeepAlive),
                    context
                )
            } else {
                context.fireChannelRead(ImmediateResponder.wrapInboundOut(.request(request)))
            }
        case .head(let head):
            context.fireChannelRead(ImmediateResponder.wrapInboundOut(.head(head)))
        case .body(let piece):
            context.fireChannelRead(ImmediateResponder.wrapInboundOut(.body(piece)))
        case .end:
            context.fireChannelRead(ImmediateResponder.wrapInboundOut(.end))
        }
    }

    private func write(
        _ response: (head: ClientHead, body: [Data], keepsAlive: Bool),
        version: HTTPVersion,
        closing: Bool,
        _ context: ChannelHandlerContext
    ) {
        let whole = ImmediateResponder.wrapOutboundOut(
            .whole(response.head.head(version: version, closing: closing), body: response.body)
        )
        guard closing else {
            context.writeAndFlush(whole, promise: nil)
            return
        }
        let channel = context.channel
        context.writeAndFlush(whole).whenComplete { _ in channel.close(promise: nil) }
    }
}
