import NIOCore
import NIOHTTP1
import NIOPosix

// A reverse proxy with no cache at all, in SwiftNIO's HTTP/1.1 pipelines: each client
// connection forwards its requests, one at a time, over one kept-alive connection to the
// origin made on the same event loop, and relays the response's parts as they come. What a
// miss costs a proxy on SwiftNIO before any cache work: no hop between threads, no store.

/// Relays one client connection's requests to its origin connection.
final class ClientSide: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let origin: SocketAddress
    var upstream: (any Channel)?
    var waiting: [HTTPClientRequestPart] = []

    init(origin: SocketAddress) { self.origin = origin }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case .head(var head):
            head.headers.replaceOrAdd(name: "Connection", value: "keep-alive")
            let request = HTTPRequestHead(version: .http1_1, method: head.method, uri: head.uri, headers: head.headers)
            self.send(.head(request), context)
        case .body(let piece):
            self.send(.body(.byteBuffer(piece)), context)
        case .end:
            self.send(.end(nil), context)
        }
    }

    private func send(_ part: HTTPClientRequestPart, _ context: ChannelHandlerContext) {
        if let upstream = self.upstream {
            if case .end = part {
                upstream.writeAndFlush(part, promise: nil)
            } else {
                upstream.write(part, promise: nil)
            }
            return
        }
        self.waiting.append(part)
        guard self.waiting.count == 1 else { return }
        let client = NIOLoopBound(context.channel, eventLoop: context.eventLoop)
        let me = NIOLoopBound(self, eventLoop: context.eventLoop)
        ClientBootstrap(group: context.eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(OriginSide(client: client.value))
                }
            }
            .connect(to: self.origin)
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    me.value.upstream = channel
                    for part in me.value.waiting { channel.write(part, promise: nil) }
                    me.value.waiting = []
                    channel.flush()
                case .failure:
                    client.value.close(promise: nil)
                }
            }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.upstream?.close(promise: nil)
    }
}

/// Relays the origin's response parts to the client connection.
final class OriginSide: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    let client: any Channel

    init(client: any Channel) { self.client = client }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case .head(let head):
            self.client.write(HTTPServerResponsePart.head(head), promise: nil)
        case .body(let piece):
            self.client.write(HTTPServerResponsePart.body(.byteBuffer(piece)), promise: nil)
        case .end:
            self.client.writeAndFlush(HTTPServerResponsePart.end(nil), promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.client.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.client.close(promise: nil)
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
let port = arguments.first.flatMap { Int($0) } ?? 18092
let originPort = arguments.dropFirst().first.flatMap { Int($0) } ?? 18100
let origin = try SocketAddress(ipAddress: "127.0.0.1", port: originPort)
let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: false)
            try channel.pipeline.syncOperations.addHandler(ClientSide(origin: origin))
        }
    }
    .bind(host: "127.0.0.1", port: port).get()
try await channel.closeFuture.get()
