import AsyncHTTPClient
import Cachalot
import Foundation
import HTTPTypes
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// An ``HTTPTransport`` on AsyncHTTPClient: SwiftNIO's HTTP client, for servers and Linux.
///
/// ```swift
/// let loader = try ResourceLoader(transport: AsyncHTTPClientTransport(), disk: disk)
/// ```
///
/// It does no caching of its own, follows the client's redirect configuration, and leaves
/// bodies as they came (no decompression), so the cache stores what the origin sent.
public struct AsyncHTTPClientTransport: HTTPTransport {
    /// The client that sends requests, made on first use: an answer from the cache never
    /// starts the client's threads.
    public var client: HTTPClient { self.makeClient() }
    /// How long a request may take until its response head has arrived.
    public var timeout: Duration
    private let makeClient: @Sendable () -> HTTPClient

    /// Creates a transport.
    ///
    /// - Parameters:
    ///   - client: The client to send with, asked for on the first request. Default:
    ///     `HTTPClient.shared`, which needs no shutdown.
    ///   - timeout: How long a request may take until its response head has arrived. Default:
    ///     30 seconds.
    public init(client: @autoclosure @escaping @Sendable () -> HTTPClient = .shared, timeout: Duration = .seconds(30)) {
        self.makeClient = client
        self.timeout = timeout
    }

    public func send(_ request: HTTPRequest, body: Data?) async throws -> HTTPTransportResponse {
        guard let url = request.url else {
            throw LoadError(.invalidRequest, "The request has no absolute URL to send to.")
        }
        var outgoing = HTTPClientRequest(url: url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        for field in request.headerFields {
            outgoing.headers.add(name: field.name.rawName, value: field.value)
        }
        if let body { outgoing.body = .bytes(ByteBuffer(data: body)) }
        let nanoseconds =
            self.timeout.components.seconds * 1_000_000_000 + self.timeout.components.attoseconds / 1_000_000_000
        let response = try await self.client.execute(outgoing, timeout: .nanoseconds(nanoseconds))
        var fields = HTTPFields()
        for header in response.headers {
            guard let name = HTTPField.Name(header.name) else { continue }
            fields.append(HTTPField(name: name, value: header.value))
        }
        let head = HTTPResponse(
            status: .init(code: Int(response.status.code), reasonPhrase: response.status.reasonPhrase),
            headerFields: fields
        )
        return HTTPTransportResponse(response: head, body: HTTPBody(response.body) { Data(buffer: $0) })
    }
}
