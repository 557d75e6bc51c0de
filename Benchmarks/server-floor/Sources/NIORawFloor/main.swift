import NIOCore
import NIOHTTP1
import NIOPosix

// A fixed answer (1,000 bytes, or the size given after the port) written as bytes already
// serialized, after SwiftNIO's HTTP/1.1 request decoder alone: no pipelining handler, no response
// encoder, no response parts, and no copy of the body (each response writes the same buffer).
// What a server codec of our own could cost per request, at most, with no cache work.
final class Raw: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = ByteBuffer

    let response: ByteBuffer

    init(size: Int) {
        var buffer = ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n")
        buffer.writeString("Cache-Control: max-age=3600\r\n\r\n")
        buffer.writeRepeatingByte(65, count: size)
        self.response = buffer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Through the class's name: through `Self`, NIO's generic helper is called unspecialized.
        guard case .end = Raw.unwrapInboundIn(data) else { return }
        context.writeAndFlush(Raw.wrapOutboundOut(self.response), promise: nil)
    }
}

let port = Int(CommandLine.arguments.dropFirst().first ?? "18094") ?? 18094
let size = Int(CommandLine.arguments.dropFirst(2).first ?? "1000") ?? 1000
let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes))
            )
            try channel.pipeline.syncOperations.addHandler(Raw(size: size))
        }
    }
    .bind(host: "127.0.0.1", port: port).get()
try await channel.closeFuture.get()
