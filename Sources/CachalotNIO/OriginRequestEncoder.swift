import NIOCore
import NIOHTTP1

/// Writes the requests of an origin connection as bytes: each head in one buffer made to fit,
/// each piece of a body as it is. It takes the place of SwiftNIO's `HTTPRequestEncoder` and
/// `NIOHTTPRequestHeadersValidator`, which cost a stored miss about 18k instructions of its
/// 510k between them (docs/performance.md): a head written field by field into a buffer grown
/// on the way, and every field checked again.
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
            var buffer = context.channel.allocator.buffer(capacity: Self.length(of: head))
            Self.write(head, into: &buffer)
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

    /// The bytes of `head` as ``write(_:into:)`` writes them.
    static func length(of head: HTTPRequestHead) -> Int {
        var length = head.method.rawValue.utf8.count + 1 + head.uri.utf8.count + " HTTP/1.1\r\n".utf8.count + 2
        for (name, value) in head.headers { length += name.utf8.count + 2 + value.utf8.count + 2 }
        return length
    }

    /// Writes `head`: its request line, each field as `name: value`, and the empty line.
    static func write(_ head: HTTPRequestHead, into buffer: inout ByteBuffer) {
        buffer.writeString(head.method.rawValue)
        buffer.writeStaticString(" ")
        buffer.writeString(head.uri)
        if head.version == .http1_1 {
            buffer.writeStaticString(" HTTP/1.1\r\n")
        } else {
            buffer.writeString(" HTTP/\(head.version.major).\(head.version.minor)\r\n")
        }
        for (name, value) in head.headers {
            buffer.writeString(name)
            buffer.writeStaticString(": ")
            buffer.writeString(value)
            buffer.writeStaticString("\r\n")
        }
        buffer.writeStaticString("\r\n")
    }
}
