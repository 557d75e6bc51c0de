import NIOCore
import NIOHTTP1
import NIOPosix

// A fixed 1 KB answer written as bytes already serialized, after SwiftNIO's HTTP/1.1 request
// decoder alone: no pipelining handler, no response encoder, no response parts. What a server
// codec of our own could cost per request, at most, with no cache work.
final class Raw: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = ByteBuffer

    let response: ByteBuffer = {
        var buffer = ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n")
        buffer.writeString("Cache-Control: max-age=3600\r\n\r\n")
        buffer.writeRepeatingByte(65, count: 1000)
        return buffer
    }()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = Self.unwrapInboundIn(data) else { return }
        context.writeAndFlush(Self.wrapOutboundOut(self.response), promise: nil)
    }
}

let port = Int(CommandLine.arguments.dropFirst().first ?? "18094") ?? 18094
let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes))
            )
            try channel.pipeline.syncOperations.addHandler(Raw())
        }
    }
    .bind(host: "127.0.0.1", port: port).get()
try await channel.closeFuture.get()
