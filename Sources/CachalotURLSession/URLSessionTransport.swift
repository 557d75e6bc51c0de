import Cachalot
import Foundation
import HTTPTypes
import HTTPTypesFoundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An ``HTTPTransport`` on Foundation's `URLSession`, with Foundation's own cache switched off:
/// Cachalot does the caching.
///
/// ```swift
/// let loader = try ResourceLoader(transport: URLSessionTransport(), disk: disk)
/// ```
///
/// The body arrives whole before the answer is returned (`URLSession`'s streaming of bytes is
/// not available on Linux), so progress is reported once, at the end.
public struct URLSessionTransport: HTTPTransport {
    /// The session that sends requests.
    public let session: URLSession

    /// Creates a transport on a session of its own: ephemeral, without a `URLCache`, ignoring
    /// any locally cached data.
    public init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        self.init(session: URLSession(configuration: configuration))
    }

    /// Creates a transport on `session`. Its configuration should have no `URLCache`, or
    /// Foundation may answer from its cache before Cachalot sees the request.
    public init(session: URLSession) {
        self.session = session
    }

    public func send(_ request: HTTPRequest, body: Data?) async throws -> HTTPTransportResponse {
        guard var urlRequest = URLRequest(httpRequest: request) else {
            throw LoadError(.invalidRequest, "The request has no absolute URL to send to.")
        }
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        let (data, urlResponse) =
            if let body {
                try await self.session.upload(for: urlRequest, from: body)
            } else {
                try await self.session.data(for: urlRequest)
            }
        guard let response = (urlResponse as? HTTPURLResponse)?.httpResponse else {
            throw LoadError(.transport, "URLSession answered without an HTTP response.")
        }
        return HTTPTransportResponse(response: response, body: HTTPBody([data]))
    }
}
