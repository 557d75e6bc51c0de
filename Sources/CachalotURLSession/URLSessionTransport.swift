import Cachalot
import Foundation
import HTTPTypes
import HTTPTypesFoundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An `HTTPTransport` on Foundation's `URLSession`, with Foundation's own cache switched off:
/// Cachalot does the caching.
///
/// ```swift
/// let loader = try ResourceLoader(transport: URLSessionTransport(), disk: disk)
/// ```
///
/// The answer comes back as soon as the response head arrives, and its body as the network
/// delivers it, so that a loader reports progress and writes a large body to disk as it comes.
/// A redirect is never followed: the loader follows it, so that each hop is cached under its
/// own URL. The session's `timeoutIntervalForRequest` bounds the wait between two pieces of
/// the body.
///
/// **Compressed bodies.** A request without `Accept-Encoding` is sent with
/// `Accept-Encoding: identity`. But `URLSession` decodes a compressed body by itself, whatever
/// the request asked for, and cannot be told not to (libcurl on Linux decodes every coding it
/// knows and fails on any other; Apple's decodes gzip, deflate and br), while it leaves
/// `Content-Encoding` and `Content-Length` in the head as the origin sent them. So that the head
/// describes the body the cache stores, the transport removes both fields when the body was
/// decoded: such a response is stored decoded. For bodies stored exactly as the origin sent
/// them, use `AsyncHTTPClientTransport`.
/// `URLSession`'s own streaming (`bytes(for:)`) is not on Linux, so the transport makes its
/// session with a delegate of its own, which hands each task's head and pieces over.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession
    private let exchanges = Exchanges()

    /// Creates a transport on a session of its own made with `configuration` (by default an
    /// ephemeral one), without a `URLCache` and ignoring any locally cached data whatever the
    /// configuration says: otherwise Foundation could answer before Cachalot sees the request.
    ///
    /// - Parameter configuration: The session's configuration, copied (the caller's is left as
    ///   it was). Default: `.ephemeral`.
    public init(configuration: URLSessionConfiguration = .ephemeral) {
        // A copy: the caller's configuration is left as it was.
        let configuration = configuration.copy() as! URLSessionConfiguration
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        self.session = URLSession(configuration: configuration, delegate: self.exchanges, delegateQueue: nil)
    }

    deinit {
        // The session keeps its delegate until it is invalidated.
        self.session.finishTasksAndInvalidate()
    }

    /// Sends `request` with `body` (as an upload task when there is one) and returns the
    /// response's head as soon as it arrives, with its body to read as it comes. A request
    /// without `Accept-Encoding` is sent with `Accept-Encoding: identity`.
    ///
    /// - Throws: `LoadError` with code `invalidRequest` if the request has no absolute URL;
    ///   `transport` if `URLSession` answers without an HTTP response or with a head HTTPTypes
    ///   cannot represent; `URLError` (or Foundation's error) when the request fails before its
    ///   head, including when the task is cancelled. Reading the body throws the task's error if
    ///   it fails later; stopping the reading cancels the task.
    public func send(_ request: HTTPRequest, body: Data?) async throws -> HTTPTransportResponse {
        guard var urlRequest = URLRequest(httpRequest: request) else {
            throw LoadError(.invalidRequest, "The request has no absolute URL to send to.")
        }
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        if request.headerFields[.acceptEncoding] == nil {
            urlRequest.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        }
        let task: URLSessionDataTask =
            if let body {
                self.session.uploadTask(with: urlRequest, from: body)
            } else {
                self.session.dataTask(with: urlRequest)
            }
        let (pieces, continuation) = AsyncThrowingStream<Data, any Error>.makeStream()
        // A body no longer read (its reader finished early or was cancelled) stops the task.
        continuation.onTermination = { termination in
            if case .cancelled = termination { task.cancel() }
        }
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { head in
                self.exchanges.begin(task, head: head, body: continuation)
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
        guard let response = head.httpResponse else {
            task.cancel()
            throw LoadError(.transport, "URLSession answered with a response head HTTPTypes cannot represent.")
        }
        return HTTPTransportResponse(response: Self.describingDecodedBody(response), body: HTTPBody(pieces) { $0 })
    }

    /// The content codings `URLSession` decodes by itself: on Linux, libcurl decodes every coding
    /// it knows and fails the transfer on any other, so a body that arrives is always decoded.
    #if canImport(FoundationNetworking)
    static func decodes(_ coding: String) -> Bool { true }
    #else
    static func decodes(_ coding: String) -> Bool { ["gzip", "x-gzip", "deflate", "br"].contains(coding) }
    #endif

    /// `response` without `Content-Encoding` and `Content-Length` if `URLSession` decoded its
    /// body (every coding it names is one that `URLSession` decodes): the fields described the
    /// body as the origin sent it, not as it is handed over.
    static func describingDecodedBody(_ response: HTTPResponse) -> HTTPResponse {
        guard let value = response.headerFields[.contentEncoding] else { return response }
        let codings = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
        guard !codings.isEmpty, codings.allSatisfy(Self.decodes) else { return response }
        var decoded = response
        decoded.headerFields[.contentEncoding] = nil
        decoded.headerFields[.contentLength] = nil
        return decoded
    }
}

/// The session's delegate: hands each task's response head to the caller waiting for it, and
/// its body, piece by piece, to the stream the caller reads.
private final class Exchanges: NSObject, URLSessionDataDelegate, Sendable {
    private struct Exchange {
        /// The caller waiting for the head; `nil` once it has it.
        var head: CheckedContinuation<HTTPURLResponse, any Error>?
        let body: AsyncThrowingStream<Data, any Error>.Continuation
    }

    private let exchanges = Mutex<[Int: Exchange]>([:])

    func begin(
        _ task: URLSessionTask,
        head: CheckedContinuation<HTTPURLResponse, any Error>,
        body: AsyncThrowingStream<Data, any Error>.Continuation
    ) {
        self.exchanges.withLock { $0[task.taskIdentifier] = Exchange(head: head, body: body) }
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let head = self.exchanges.withLock { exchanges in
            defer { exchanges[dataTask.taskIdentifier]?.head = nil }
            return exchanges[dataTask.taskIdentifier]?.head
        }
        guard let response = response as? HTTPURLResponse else {
            completionHandler(.cancel)
            head?.resume(throwing: LoadError(.transport, "URLSession answered without an HTTP response."))
            return
        }
        completionHandler(.allow)
        head?.resume(returning: response)
    }

    /// The redirect itself is the answer: the loader follows it.
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let body = self.exchanges.withLock { $0[dataTask.taskIdentifier]?.body }
        body?.yield(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let exchange = self.exchanges.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let error {
            exchange.head?.resume(throwing: error)
            exchange.body.finish(throwing: error)
        } else {
            exchange.head?.resume(
                throwing: LoadError(.transport, "URLSession finished the request without a response head.")
            )
            exchange.body.finish()
        }
    }
}
