import Cachalot
import CachalotImages
import Foundation
import HTTPTypes
import NIOHTTP1

/// Answers the image endpoint's requests (see ``ImageEndpoint``): checks the signature and the
/// source, then hands out the variant the pipeline makes or keeps.
///
/// A class: every request of the proxy asks it whether it claims the path.
final class ImageResponder: Sendable {
    let server: CacheServer
    let endpoint: ImageEndpoint
    let pipeline: ImagePipeline
    /// The origin as `scheme://authority/base`, without a last `/`.
    let origin: String

    init(server: CacheServer, endpoint: ImageEndpoint, pipeline: ImagePipeline, origin: String) {
        self.server = server
        self.endpoint = endpoint
        self.pipeline = pipeline
        self.origin = origin
    }

    /// Whether `uri` is the endpoint's.
    func claims(_ uri: String) -> Bool {
        uri.hasPrefix(self.endpoint.prefix)
    }

    func respond(to request: ServerRequest, with writer: inout ResponseWriter) async throws -> Bool {
        let started = ContinuousClock.now
        let head = request.head
        var status = HTTPResponse.Status.ok
        var answer: (response: HTTPResponse, body: Data)
        do {
            answer = try await self.answer(request)
        } catch let refusal as Refusal {
            status = refusal.status
            answer = self.refusal(refusal)
            if refusal.status == .serviceUnavailable { self.server.metrics?.imageRefusedAsBusy() }
        }
        status = answer.response.status
        let cacheStatus = answer.response.headerFields[.cacheStatus] ?? ""
        // A 304 has no body, and no length but its representation's, which it need not say.
        if status != .notModified { answer.response.headerFields[.contentLength] = String(answer.body.count) }
        answer.response.headerFields[.date] = DateField.text()
        let body = head.method == .HEAD ? Data() : answer.body
        // Counted before it is sent, so that a client that has its answer sees it counted. A 304
        // is an answer, not an error.
        self.server.metrics?.request(
            status != .ok && status != .notModified ? .error : cacheStatus.contains("; hit") ? .hit : .forward,
            bytes: body.count
        )
        writer.head(answer.response)
        try await writer.whole(body)
        self.server.log(request, status: status.code, cacheStatus: cacheStatus, bytes: body.count, since: started)
        return true
    }

    /// Why a request gets no image: its status, and the detail said in `Cache-Status` and the body.
    struct Refusal: Error {
        var status: HTTPResponse.Status
        var detail: String
        var message: String
        /// Seconds after which to ask again, for `Retry-After`.
        var retryAfter: Int?
    }

    private func refusal(_ refusal: Refusal) -> (response: HTTPResponse, body: Data) {
        var response = HTTPResponse(status: refusal.status)
        response.headerFields[.cacheStatus] =
            CacheStatus(name: self.server.configuration.name, forward: nil, detail: refusal.detail).description
        response.headerFields[.contentType] = "text/plain; charset=utf-8"
        response.headerFields[.cacheControl] = "no-store"
        if let seconds = refusal.retryAfter { response.headerFields[.retryAfter] = String(seconds) }
        return (response, Data((refusal.message + "\n").utf8))
    }

    private func answer(_ request: ServerRequest) async throws -> (response: HTTPResponse, body: Data) {
        let head = request.head
        guard head.method == .GET || head.method == .HEAD else {
            throw Refusal(status: .methodNotAllowed, detail: "method", message: "Images are read with GET or HEAD.")
        }
        let image: ImageRequest
        do {
            image = try ImageRequest(head.uri.dropFirst(self.endpoint.prefix.count))
        } catch {
            throw Refusal(status: .badRequest, detail: "bad-request", message: error.message)
        }
        guard self.endpoint.verifies(image.signature, of: image.signed) else {
            throw Refusal(
                status: .forbidden,
                detail: "bad-signature",
                message: "The signature does not match the path."
            )
        }
        guard let url = self.sourceURL(image.source) else {
            throw Refusal(status: .forbidden, detail: "foreign-source", message: "The source is not on the origin.")
        }
        // Converted once: the format's negotiation and the client's preconditions read them.
        let fields = request.fields
        let accepted = image.format == nil ? ImageRequest.accepted(fields[.accept]) : []
        do {
            let encoded = try await self.pipeline.encodedImage(
                for: url,
                processors: image.processors,
                choosing: image.encodingChoice(accepted: accepted)
            )
            let timeToLive = max(0, Int(encoded.expires.timeIntervalSinceNow.rounded(.down)))
            var response = HTTPResponse(status: .ok)
            response.headerFields[.contentType] = encoded.format.mediaType
            // A stored variant has a tag, by which downstream revalidates it once it is stale;
            // one that is not kept may not be stored downstream either.
            response.headerFields[.eTag] = encoded.entityTag
            response.headerFields[.cacheControl] =
                timeToLive > 0
                ? "public, max-age=\(timeToLive)" : encoded.entityTag != nil ? "public, no-cache" : "no-store"
            if image.format == nil { response.headerFields[.vary] = "Accept" }
            var cacheStatus = CacheStatus(name: self.server.configuration.name)
            switch encoded.source {
            case .stored:
                cacheStatus.hit = true
                cacheStatus.timeToLive = timeToLive
            case .revalidated:
                // Stored, expired, and kept: the original, loaded again, had not changed. Only a
                // trip to the origin is a forward.
                switch encoded.original {
                case .memory?, .disk?, .shared?:
                    cacheStatus.hit = true
                case .revalidated?:
                    cacheStatus.forward = "stale"
                    cacheStatus.forwardStatus = 304
                    cacheStatus.stored = true
                default:
                    cacheStatus.forward = "stale"
                    cacheStatus.stored = true
                }
                cacheStatus.timeToLive = timeToLive
            case .made where timeToLive > 0:
                cacheStatus.forward = "miss"
                cacheStatus.timeToLive = timeToLive
                cacheStatus.stored = true
            case .made:
                cacheStatus.forward = "miss"
                cacheStatus.stored = encoded.entityTag != nil
            }
            response.headerFields[.cacheStatus] = cacheStatus.description
            let conditional = HTTPRequest(
                method: head.method == .HEAD ? .head : .get,
                scheme: nil,
                authority: nil,
                path: "/",
                headerFields: fields
            )
            if Preconditions.evaluate(conditional, against: response) == .notModified {
                var notModified = Preconditions.notModified(from: response)
                notModified.headerFields[.cacheStatus] = cacheStatus.description
                return (notModified, Data())
            }
            return (response, encoded.data)
        } catch let error as ImageError {
            throw Self.refusal(of: error)
        } catch let error as LoadError {
            let (status, detail) = ProxyResponder.failure(error)
            throw Refusal(status: status, detail: detail, message: "\(status.reasonPhrase): \(detail)")
        }
    }

    /// What the client is told when an image cannot be made.
    private static func refusal(of error: ImageError) -> Refusal {
        switch error.code {
        case .status(let status) where (400..<500).contains(status):
            Refusal(status: .init(code: status), detail: "origin-status", message: "The origin answered \(status).")
        case .status(let status):
            Refusal(status: .badGateway, detail: "origin-status", message: "The origin answered \(status).")
        case .tooLarge:
            Refusal(status: .unprocessableContent, detail: "too-large", message: error.message)
        case .busy:
            // As imgproxy's queue limit, but 503: the server, not the client, is over its limit.
            Refusal(
                status: .serviceUnavailable,
                detail: "images-busy",
                message: "The proxy is making as many images as it may (\(error.message)); ask again in a second.",
                retryAfter: 1
            )
        default:
            Refusal(status: .unprocessableContent, detail: "not-an-image", message: error.message)
        }
    }

    /// The source's URL on the origin, or `nil` if it is elsewhere: a path is on the origin; a
    /// whole URL must start with the origin as configured, then `/`.
    private func sourceURL(_ source: String) -> URL? {
        guard let url = URL(string: source.hasPrefix("/") ? self.origin + source : source),
            url.absoluteString.hasPrefix(self.origin + "/")
        else { return nil }
        return url
    }
}
