import NIOCore
import NIOHTTP1
import NIOPosix

// A fixed 1 KB answer from a channel handler on the event loop, in SwiftNIO's HTTP/1.1 server
// pipeline (the one cachalot serve builds on): what SwiftNIO costs per request with no work of
// the handler's own.
final class Fixed: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = Self.unwrapInboundIn(data) else { return }
        let headers = HTTPHeaders([("Content-Length", "1000"), ("Cache-Control", "max-age=3600")])
        context.write(
            Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))),
            promise: nil
        )
        context.write(Self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(repeating: 65, count: 1000)))), promise: nil)
        context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
    }
}

let port = Int(CommandLine.arguments.dropFirst().first ?? "18091") ?? 18091
let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: false)
            try channel.pipeline.syncOperations.addHandler(Fixed())
        }
    }
    .bind(host: "127.0.0.1", port: port).get()
try await channel.closeFuture.get()
