import Cachalot
import NIOCore
import NIOHTTP1

/// Writes the requests of an origin connection as bytes: each head in one buffer made to fit,
/// each piece of a body as it is. It takes the place of SwiftNIO's `HTTPRequestEncoder` and
/// `NIOHTTPRequestHeadersValidator`, which wrote a head field by field into a buffer grown on
/// the way and checked every field again. With it in their place (and heads made as pairs, a
/// streamed answer's conditions skipped when it has none), a stored miss takes 16.2k
/// instructions fewer, of 510k (docs/performance.md).
///
/// Nothing is checked here because nothing needs to be: a head is made by
/// ``NIOTransport/requestHead(_:target:bodyLength:)`` from an `HTTPRequest`, whose field names
/// are tokens and whose values swift-http-types has cleaned of line breaks and other control
/// bytes, and it frames its body itself, with `Content-Length` (it has no `Transfer-Encoding`).
/// The end of a request writes nothing.
///
/// It stays before SwiftNIO's response decoder in the pipeline, which reads each request head
/// on its way out: the decoder learns from it which responses answer a `HEAD`.
final class OriginRequestEncoder: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = IOData

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Through the class's name, not `Self`: through `Self`, NIO's generic helper is called
        // unspecialized, and looks the message's type up at run time (docs/performance.md).
        switch OriginRequestEncoder.unwrapOutboundIn(data) {
        case .head(let head):
            let length = Self.length(of: head)
            var buffer = context.channel.allocator.buffer(capacity: length)
            Self.write(head, length: length, into: &buffer)
            context.write(OriginRequestEncoder.wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
        case .body(let piece):
            context.write(OriginRequestEncoder.wrapOutboundOut(piece), promise: promise)
        case .end:
            if let promise {
                // Written empty so that the promise completes after what went before.
                context.write(OriginRequestEncoder.wrapOutboundOut(.byteBuffer(ByteBuffer())), promise: promise)
            }
        }
    }

    /// The bytes of `head` as ``write(_:length:into:)`` writes them.
    static func length(of head: HTTPRequestHead) -> Int {
        var length = head.method.rawValue.utf8.count + 1 + head.uri.utf8.count + Self.versionText(head).utf8.count + 2
        for (name, value) in head.headers { length += ByteWriter.fieldLength(name, value) }
        return length
    }

    /// Writes `head`, its `length` bytes counted first, in one write (each write to a buffer
    /// checks its room and its ownership): its request line, each field as `name: value`, the
    /// empty line.
    static func write(_ head: HTTPRequestHead, length: Int, into buffer: inout ByteBuffer) {
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: length) { target in
            var writer = ByteWriter(UnsafeMutableRawBufferPointer(rebasing: target[..<length]))
            writer.write(head.method.rawValue)
            writer.write(" ")
            writer.write(head.uri)
            writer.write(Self.versionText(head))
            for (name, value) in head.headers { writer.writeField(name, value) }
            writer.write("\r\n")
            return writer.count
        }
    }

    /// The request line's end: ` HTTP/1.1` and its line break, for `head`'s version.
    private static func versionText(_ head: HTTPRequestHead) -> String {
        head.version == .http1_1 ? " HTTP/1.1\r\n" : " HTTP/\(head.version.major).\(head.version.minor)\r\n"
    }
}
