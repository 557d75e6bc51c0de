import Foundation
import NIOHTTP1

/// A whole response that a connection's event loop gives at once, without the connection's task.
struct ImmediateAnswer {
    var head: ResponseHead
    var body: [Data]
    /// Whether the connection closes after it: its request asked for that, or its responder
    /// decided so. The head says so with `Connection: close` (RFC 9112 §9.6).
    var closing: Bool
}

/// What ``ServerCodec`` asks, on the connection's event loop, to answer a request at once.
protocol ImmediateAnswering: AnyObject {
    /// The answer to `request`, a `GET` or `HEAD` read whole, if it can be given now; else `nil`,
    /// and `request` goes on to the connection's task, with what was prepared for it kept in it.
    func answer(_ request: inout ServerRequest) -> ImmediateAnswer?
}

/// Prepares each `GET` and `HEAD` without a body that ``ServerCodec`` read whole, once, on the
/// connection's event loop: answers there what the cache answers at once (see
/// ``ProxyResponder/prepare(_:memo:)``), and leaves the others, prepared, to the connection's
/// task (``ServerRequestPart/request(_:)``). Other requests go on in parts, which the task reads
/// with its limits.
///
/// A hit so never goes through the connection's task (when that task ran on the cooperative
/// pool, the hop there and back cost more than the hit itself), nor through a handler of its own:
/// the codec that read the request writes its answer. A miss is not converted, keyed and looked
/// up in memory a second time. One per connection.
final class ImmediateResponder: ImmediateAnswering {
    private let responder: ProxyResponder
    private let connections: ConnectionRegistry
    /// The connection's last request for the origin, made on this loop.
    private var upstream: ProxyResponder.UpstreamMemo?

    init(responder: ProxyResponder, connections: ConnectionRegistry) {
        self.responder = responder
        self.connections = connections
    }

    func answer(_ request: inout ServerRequest) -> ImmediateAnswer? {
        guard !self.connections.isShuttingDown,
            let response = self.responder.prepare(&request, memo: &self.upstream)
        else { return nil }
        let closing = !(response.keepsAlive && request.isKeepAlive)
        return ImmediateAnswer(
            head: response.head.head(version: request.head.version, closing: closing),
            body: response.body,
            closing: closing
        )
    }
}
