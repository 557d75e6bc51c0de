import AsyncHTTPClient
import Cachalot
import Foundation
import HTTPTypes
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// An `HTTPTransport` on AsyncHTTPClient: SwiftNIO's HTTP client, for servers and Linux.
///
/// ```swift
/// let loader = try ResourceLoader(transport: AsyncHTTPClientTransport(), disk: disk)
/// ```
///
/// An idempotent request (`GET`, `HEAD`, `PUT`, `DELETE`…) that meets a pooled connection the
/// origin has just closed is sent once more on a new connection, instead of failing.
///
/// It does no caching of its own, never follows a redirect (the loader does, so that each hop
/// is cached under its own URL), and leaves bodies exactly as the origin sent them: nothing is
/// decompressed, and `Accept-Encoding` is sent only if the request has it. The cache stores
/// what the origin sent, `Content-Encoding` and all; decoding is the reader's business.
///
/// A client of your own must be configured the same way: start from
/// ``clientConfiguration(idleTimeout:)``. AsyncHTTPClient's `HTTPClient.shared` follows
/// redirects and decompresses, so the transport refuses the answers of a client that followed
/// a redirect, and a client that decompresses would have the cache store decoded bodies under
/// their encoding.
public struct AsyncHTTPClientTransport: HTTPTransport {
    /// The client that sends requests, made on first use: an answer from the cache never
    /// starts the client's threads.
    public var client: HTTPClient { self.makeClient() }
    /// How long a request may take until its response head has arrived. Default: 30 seconds.
    public var timeout: Duration
    private let makeClient: @Sendable () -> HTTPClient

    /// Creates a transport.
    ///
    /// - Parameters:
    ///   - client: The client to send with, asked for on the first request. Default:
    ///     ``defaultClient``, which needs no shutdown.
    ///   - timeout: How long a request may take until its response head has arrived. Default:
    ///     30 seconds. The client's read timeout bounds the wait between two pieces of the
    ///     body.
    public init(
        client: @autoclosure @escaping @Sendable () -> HTTPClient = Self.defaultClient,
        timeout: Duration = .seconds(30)
    ) {
        self.makeClient = client
        self.timeout = timeout
    }

    /// The configuration a cache's client needs: redirects not followed, bodies not
    /// decompressed, and at most `idleTimeout` between two reads from the connection, so that
    /// a body that trickles or stalls fails instead of holding the load forever.
    ///
    /// ```swift
    /// var configuration = AsyncHTTPClientTransport.clientConfiguration(idleTimeout: .seconds(10))
    /// configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 16
    /// let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    /// let transport = AsyncHTTPClientTransport(client: client)  // shut the client down when done
    /// ```
    ///
    /// - Parameter idleTimeout: The most time between two reads from a connection (the client's
    ///   read timeout). Default: 30 seconds.
    public static func clientConfiguration(idleTimeout: Duration = .seconds(30)) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            decompression: .disabled
        )
        configuration.timeout.read = .nanoseconds(Self.nanoseconds(idleTimeout))
        return configuration
    }

    /// A client with ``clientConfiguration(idleTimeout:)``'s defaults on the shared event loops,
    /// made on first use. Like `HTTPClient.shared`, it lives as long as the process and needs no
    /// shutdown.
    public static let defaultClient = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup,
        configuration: Self.clientConfiguration()
    )

    /// Sends `request` with `body` through ``client`` and returns the response's head as soon as
    /// it arrives, with its body to read as it comes. An idempotent request that meets a pooled
    /// connection the origin has just closed is sent once more.
    ///
    /// - Throws: `LoadError` with code `invalidRequest` if the request has no absolute `http` or
    ///   `https` URL with a host, or its port is outside 1–65535; `transport` if the client
    ///   followed a redirect (a client not made with ``clientConfiguration(idleTimeout:)``);
    ///   `invalidResponse` for a status outside 0–999; `HTTPTransportError` with code
    ///   `connectTimeout` or `responseTimeout` when ``timeout`` or the client's own timeouts
    ///   passed before a head (AsyncHTTPClient's error as its `underlying`); and
    ///   AsyncHTTPClient's `HTTPClientError` when no head arrives for another reason (the
    ///   origin could not be reached, the connection broke, or the task was cancelled). Reading the body throws `HTTPClientError` if the
    ///   connection breaks or the client's read timeout passes between two pieces.
    public func send(_ request: HTTPRequest, body: Data?) async throws -> HTTPTransportResponse {
        let url = try Self.checkedURL(of: request)
        var outgoing = HTTPClientRequest(url: url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        for field in request.headerFields {
            outgoing.headers.add(name: field.name.rawName, value: field.value)
        }
        if let body { outgoing.body = .bytes(ByteBuffer(data: body)) }
        let timeout = TimeAmount.nanoseconds(Self.nanoseconds(self.timeout))
        let response: HTTPClientResponse
        do {
            do {
                response = try await self.client.execute(outgoing, timeout: timeout)
            } catch let error as HTTPClientError
                where error == .remoteConnectionClosed && Self.isIdempotent(request.method)
            {
                // The origin closed a pooled connection as the request went out on it (an idle
                // timeout of its own): the request may be sent again, once, on a new connection.
                response = try await self.client.execute(outgoing, timeout: timeout)
            }
        } catch let error as HTTPClientError where error == .connectTimeout {
            throw HTTPTransportError(
                .connectTimeout,
                "No connection to \(url.absoluteString) in time.",
                underlying: error
            )
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            throw HTTPTransportError(
                .responseTimeout,
                "No response from \(url.absoluteString) in time.",
                underlying: error
            )
        }
        guard response.history.count <= 1 else {
            throw LoadError(
                .transport,
                "The HTTPClient followed a redirect from \(url.absoluteString), so its answer cannot be cached "
                    + "under that URL; give the transport a client configured with "
                    + "AsyncHTTPClientTransport.clientConfiguration()."
            )
        }
        let code = Int(response.status.code)
        // HTTPTypes traps on a status outside 0–999; the loader refuses anything but 200–599.
        guard (0...999).contains(code) else {
            throw LoadError(.invalidResponse, "The origin answered \(url.absoluteString) with the status \(code).")
        }
        var fields = HTTPFields()
        for header in response.headers {
            guard let name = HTTPField.Name(header.name) else { continue }
            fields.append(HTTPField(name: name, value: header.value))
        }
        let head = HTTPResponse(
            status: .init(code: code, reasonPhrase: response.status.reasonPhrase),
            headerFields: fields
        )
        return HTTPTransportResponse(response: head, body: HTTPBody(response.body) { Data(buffer: $0) })
    }

    /// Whether a request with `method` may be sent twice with the effect of once (RFC 9110
    /// §9.2.2).
    static func isIdempotent(_ method: HTTPRequest.Method) -> Bool {
        [.get, .head, .options, .trace, .put, .delete].contains(method)
    }

    /// The request's URL, checked for what AsyncHTTPClient and SwiftNIO trap on or cannot send:
    /// a scheme other than `http` or `https`, no host, a port outside 1–65535.
    static func checkedURL(of request: HTTPRequest) throws -> URL {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host(), !host.isEmpty
        else {
            throw LoadError(.invalidRequest, "The request has no absolute http or https URL to send to.")
        }
        if let port = url.port, !(1...65_535).contains(port) {
            throw LoadError(.invalidRequest, "The port \(port) of \(url.absoluteString) is not from 1 to 65535.")
        }
        return url
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}
