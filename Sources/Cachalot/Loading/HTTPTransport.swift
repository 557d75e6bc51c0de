import Foundation
import HTTPTypes

/// Sends HTTP requests for a ``ResourceLoader``: the one part of it that touches the network.
///
/// Cachalot ships three: `NIOTransport` (module `CachalotNIO`), which owns its exchange on
/// SwiftNIO's HTTP/1.1 codec so that no byte an origin sends can trap, for servers and Linux;
/// `AsyncHTTPClientTransport` (module `CachalotAsyncHTTPClient`); and `URLSessionTransport`
/// (module `CachalotURLSession`), with Foundation's own cache switched off. A transport does no
/// caching of its own.
public protocol HTTPTransport: Sendable {
    /// Sends `request` with `body` and returns the response's head as soon as it arrives, with
    /// its body to read as it comes.
    ///
    /// - Throws: Any error of the underlying client when no response head arrives: the
    ///   origin could not be reached, the connection broke, or the task was cancelled.
    func send(_ request: HTTPRequest, body: Data?) async throws -> HTTPTransportResponse

    /// Sends `request` with `body`, hands each interim response (1xx, such as 103 Early Hints)
    /// to `interim` as it arrives, and returns the final response's head as soon as it arrives,
    /// with its body to read as it comes.
    ///
    /// The default implementation calls ``send(_:body:)``: a transport that cannot see interim
    /// responses reports none.
    ///
    /// - Throws: What ``send(_:body:)`` throws.
    func send(
        _ request: HTTPRequest,
        body: Data?,
        interim: @escaping @Sendable (HTTPResponse) async -> Void
    ) async throws -> HTTPTransportResponse
}

extension HTTPTransport {
    /// Sends `request` through ``send(_:body:)``, reporting no interim response.
    ///
    /// - Throws: What ``send(_:body:)`` throws.
    public func send(
        _ request: HTTPRequest,
        body: Data?,
        interim: @escaping @Sendable (HTTPResponse) async -> Void
    ) async throws -> HTTPTransportResponse {
        try await self.send(request, body: body)
    }
}

/// A response head and its body as it arrives.
public struct HTTPTransportResponse: Sendable {
    /// The status and header fields.
    public var response: HTTPResponse
    /// The body, in pieces.
    public var body: HTTPBody

    /// Creates a response from its head and body.
    public init(response: HTTPResponse, body: HTTPBody) {
        self.response = response
        self.body = body
    }
}

/// A response body read in pieces, as the network delivers them.
///
/// It can be iterated once: it reads from the connection, and what was read is gone.
public struct HTTPBody: AsyncSequence, Sendable {
    /// A piece of the body, as the network delivered it.
    public typealias Element = Data

    @usableFromInline let makeNext: @Sendable () -> () async throws -> Data?

    /// A body read from `sequence`, each element turned into `Data` by `transform`; the
    /// sequence's errors are the body's.
    ///
    /// Inlinable, so that its reading is specialized for the caller's sequence: generic, it
    /// looked the sequence's types up at run time for every piece.
    @inlinable
    public init<Base: AsyncSequence & Sendable>(
        _ sequence: Base,
        transform: @escaping @Sendable (Base.Element) -> Data
    ) {
        self.makeNext = {
            var iterator = sequence.makeAsyncIterator()
            return { try await iterator.next().map(transform) }
        }
    }

    /// A body that yields `pieces` in order.
    public init(_ pieces: [Data]) {
        self.init(Pieces(pieces: pieces)) { $0 }
    }

    /// An iterator over the pieces. A body from the network is read once: a second iterator
    /// gets what the first left, if anything.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(nextPiece: self.makeNext())
    }

    /// Reads the pieces of a body in order.
    public struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate let nextPiece: () async throws -> Data?

        /// The next piece; `nil` at the end of the body.
        ///
        /// - Throws: The transport's error if the connection broke or timed out before the end.
        public mutating func next() async throws -> Data? {
            try await self.nextPiece()
        }
    }

    private struct Pieces: AsyncSequence, Sendable {
        let pieces: [Data]

        func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(remaining: self.pieces[...])
        }

        struct AsyncIterator: AsyncIteratorProtocol {
            var remaining: ArraySlice<Data>

            mutating func next() async -> Data? {
                self.remaining.popFirst()
            }
        }
    }
}
