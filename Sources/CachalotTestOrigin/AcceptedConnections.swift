import NIOCore

/// Wraps a connection an origin accepted, in a way that a connection released unserved is
/// closed. One accepted as the origin stops reaches its listener's stream after the stream has
/// ended; SwiftNIO's `init(wrappingChannelSynchronously:)` would then stop the whole test
/// process ("Deinited NIOAsyncWriter without calling finish()", apple/swift-nio#2637).
protocol AcceptedConnections: Sendable {
    static func wrap<Inbound: Sendable, Outbound: Sendable>(
        _ channel: any Channel
    ) throws -> NIOAsyncChannel<Inbound, Outbound>
}

/// ``AcceptedConnections`` by SwiftNIO's deprecated `init(synchronouslyWrapping:)`, whose
/// wrapper closes its channel when released: deprecated only to prefer explicit teardown, which
/// every served connection still gets. Called through the protocol, so that the deprecation is
/// said once, here.
enum ClosedWhenReleased: AcceptedConnections {
    @available(*, deprecated, message: "Closes a connection released unserved instead of trapping; see the type.")
    static func wrap<Inbound: Sendable, Outbound: Sendable>(
        _ channel: any Channel
    ) throws -> NIOAsyncChannel<Inbound, Outbound> {
        try NIOAsyncChannel(synchronouslyWrapping: channel)
    }
}

/// The wrapper origins use for their connections.
let acceptedConnections: any AcceptedConnections.Type = ClosedWhenReleased.self
