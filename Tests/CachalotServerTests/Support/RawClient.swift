import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// A client that sends bytes no HTTP library would, and reads what comes back until the
/// server closes the connection.
enum RawClient {
    /// Sends `text` to 127.0.0.1:`port`, then reads until the server closes; returns what it read.
    ///
    /// With `receiveBufferSize`, a slow reader: its socket's receive buffer is that small
    /// (`SO_RCVBUF`), and it yields after each piece it reads, so that what the server writes
    /// waits in the server's buffers (no sleep: it is slow, not late).
    static func exchange(_ text: String, port: Int, receiveBufferSize: Int? = nil) async throws -> String {
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        if let receiveBufferSize {
            bootstrap = bootstrap.channelOption(.socketOption(.so_rcvbuf), value: SocketOptionValue(receiveBufferSize))
        }
        let channel = try await bootstrap.connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
        return try await channel.executeThenClose { inbound, outbound in
            do {
                try await outbound.write(ByteBuffer(string: text))
            } catch let error as ChannelError where error == .ioOnClosedChannel {
                // The server closed first (a timeout that a loaded machine let pass before the write).
                return ""
            } catch let error as IOError where [EPIPE, ECONNRESET].contains(error.errnoCode) {
                return ""
            }
            var received = ""
            do {
                for try await piece in inbound {
                    received += String(buffer: piece)
                    if receiveBufferSize != nil { await Task.yield() }
                }
            } catch let error as IOError where error.errnoCode == ECONNRESET {
                // A server that closes with the request unread resets the connection: closed all the same.
            }
            return received
        }
    }

    /// The status code of each response in `text`, in order: of each status line, at the start of
    /// a line or right after the body before it (which need not end with a line break).
    static func statuses(in text: String) -> [Int] {
        text.matches(of: #/HTTP/1\.[01] (\d{3}) /#).compactMap { Int($0.output.1) }
    }
}

extension RawClient {
    /// Opens a connection to 127.0.0.1:`port` and runs `body` with it; closes it after.
    static func withConnection<Result: Sendable>(
        port: Int,
        _ body: (
            inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator, NIOAsyncChannelOutboundWriter<ByteBuffer>
        ) async throws -> Result
    ) async throws -> Result {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var iterator = inbound.makeAsyncIterator()
            return try await body(&iterator, outbound)
        }
    }

    /// Reads one response whose body has a `Content-Length`; returns it as text.
    static func readResponse(
        _ iterator: inout NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    ) async throws
        -> String
    {
        var received = ""
        while let piece = try await iterator.next() {
            received += String(buffer: piece)
            guard let end = received.range(of: "\r\n\r\n") else { continue }
            let head = received[..<end.lowerBound].lowercased()
            let length =
                head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            if received.utf8.count - received[..<end.upperBound].utf8.count >= length { break }
        }
        return received
    }
}
