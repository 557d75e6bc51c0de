import Foundation
import HTTPTypes

/// A loaded resource whose body is read as it arrives: for bodies of any size, or of no known
/// end, which ``ResourceLoader/stream(_:body:policy:priority:interim:)`` never holds whole.
public struct ResourceStream: Sendable {
    /// The status and header fields. An answer from the cache carries `Age`.
    public var response: HTTPResponse
    /// Where the answer came from.
    public var source: Resource.Source
    /// The URLs of the redirects the load followed, in order; see ``Resource/redirects``.
    public var redirects: [URL] = []
    /// The body, in pieces. An answer from the cache is one piece (mapped from its file when
    /// large). An answer from the network is read from the connection as it is iterated, once.
    public var body: HTTPBody
    /// The body's length when it is known before it is read: always for an answer from the
    /// cache, and for one from the network that announced its `Content-Length`. `nil` for an
    /// answer that has no body (to `HEAD`, a 204, a 304) or whose length is unknown.
    public var length: Int?
    /// Why the request went to the origin; `nil` when it did not. See ``Resource/forwardReason``.
    public var forwardReason: Resource.ForwardReason?
    /// How many more seconds a stored answer stays fresh; `nil` for an answer that was not
    /// stored. See ``Resource/timeToLive``.
    public var timeToLive: Int?
    /// Whether a response from the network is being stored as it passes: it will be, once it
    /// has been read whole, unless it outgrows the largest entry or the disk tier fails.
    public var isStoring = false
    /// Whether this load joined an identical one already on its way to the origin, and reads
    /// the answer that one brings instead of sending a request of its own.
    public var isCollapsed = false
    /// The answer whole, when it was whole before it was a stream.
    private var whole: Resource?

    /// A stream of a whole resource: its body in one piece.
    public init(_ resource: Resource) {
        self.response = resource.response
        self.source = resource.source
        self.redirects = resource.redirects
        self.body = HTTPBody(resource.body.isEmpty ? [] : [resource.body])
        self.length = resource.body.count
        self.forwardReason = resource.forwardReason
        self.timeToLive = resource.timeToLive
        self.whole = resource
    }

    init(response: HTTPResponse, source: Resource.Source, body: HTTPBody, length: Int?) {
        self.response = response
        self.source = source
        self.body = body
        self.length = length
    }

    /// The bytes of body known to have been answered with before the body is read: a whole
    /// answer's, else none.
    var answeredBytes: Int {
        self.whole?.body.count ?? 0
    }

    /// The resource, its body read whole.
    func collected() async throws -> Resource {
        var resource: Resource
        if let whole = self.whole {
            resource = whole
        } else {
            var data = Data()
            for try await piece in self.body { data.append(piece) }
            resource = Resource(body: data, response: self.response, source: self.source)
        }
        resource.redirects = self.redirects
        resource.forwardReason = self.forwardReason
        return resource
    }

    /// Reads the body of a redirect to follow, up to a bound, so that it is stored if it may be.
    ///
    /// - Throws: ``LoadError/Code/invalidResponse`` for a body over the bound; what reading
    ///   the body throws.
    func drainRedirect(from url: URL?) async throws {
        guard self.whole == nil else { return }
        var count = 0
        for try await piece in self.body {
            count += piece.count
            guard count <= Self.largestRedirectBody else {
                throw LoadError(
                    .invalidResponse,
                    "The redirect from \(url?.absoluteString ?? "?") has a body of more than "
                        + "\(Self.largestRedirectBody) bytes; it was not followed."
                )
            }
        }
    }

    /// The largest body of a redirect that a load reads to follow it.
    static let largestRedirectBody = 1 << 20
}
