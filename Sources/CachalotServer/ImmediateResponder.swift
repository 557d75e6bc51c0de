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
    /// Whether anything of the current read went on to the connection's task: the end of a read
    /// that went nowhere (all of it answered here) is not passed on, since the task's handler
    /// would find nothing to deliver.
    private var hasHandedOn = false

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
                self.handOn(.request(request), context)
            }
        case .head(let head):
            self.handOn(.head(head), context)
        case .body(let piece):
            self.handOn(.body(piece), context)
        case .end:
            self.handOn(.end, context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard self.hasHandedOn else { return }
        self.hasHandedOn = false
        context.fireChannelReadComplete()
    }

    private func handOn(_ part: ServerRequestPart, _ context: ChannelHandlerContext) {
        self.hasHandedOn = true
        context.fireChannelRead(ImmediateResponder.wrapInboundOut(part))
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
