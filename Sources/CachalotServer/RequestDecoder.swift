import NIOCore
import NIOHTTP1

/// Reads a connection's requests from its bytes with a ``RequestParser``, and hands on their
/// parts as NIO's `HTTPServerRequestPart`s; hands on a refusal (a ``RequestParseError``) as an
/// error once, and drops every byte after it.
///
/// Bytes of a head, or of a chunk's size line, that has not all come are kept until it has; a
/// body's bytes go on as slices of the reads that brought them, as they come.
final class RequestDecoder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = HTTPServerRequestPart

    private var parser: RequestParser
    /// The bytes read and not yet parsed.
    private var unparsed: ByteBuffer?

    init(maximumRequestLine: Int, maximumHeaderBytes: Int) {
        self.parser = RequestParser(maximumRequestLine: maximumRequestLine, maximumHeaderBytes: maximumHeaderBytes)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Through the class's name, not `Self`: through `Self`, NIO's generic helper is called
        // unspecialized, and looks the message's type up at run time (docs/performance.md).
        var bytes = RequestDecoder.unwrapInboundIn(data)
        if var unparsed = self.unparsed {
            self.unparsed = nil
            unparsed.writeBuffer(&bytes)
            bytes = unparsed
        }
        do {
            while let part = try self.parser.next(&bytes) {
                context.fireChannelRead(RequestDecoder.wrapInboundOut(part))
            }
        } catch {
            context.fireErrorCaught(error)
        }
        if bytes.readableBytes > 0 { self.unparsed = bytes }
    }
}
