import Foundation
import HTTPTypes
import Synchronization

/// What identifies identical requests in flight: loads that share a key share one request to
/// the origin.
struct FlightKey: Hashable, Sendable {
    /// What the callers of a flight are given.
    enum Kind: Hashable, Sendable {
        /// The whole answer, body read (`load`): requests are identical when their fields are
        /// too, so that any answer can be shared, whatever it varies on.
        case whole(fields: [String])
        /// The head, and the body to read as it arrives (`stream`): the answer's `Vary` is
        /// checked against each caller's request once its head is here.
        case streamed
        /// A revalidation in the background, which no caller waits for: one per stored URL.
        case revalidation
    }

    var key: ResponseKey
    /// Whether the request validates a stored response.
    var isValidating: Bool
    var kind: Kind

    init(_ key: ResponseKey, validating: Bool, kind: Kind) {
        self.key = key
        self.isValidating = validating
        self.kind = kind
    }

    /// The key of a request whose callers want its answer whole.
    static func whole(_ key: ResponseKey, _ request: HTTPRequest, validating: Bool) -> FlightKey {
        let fields = request.headerFields.map { "\($0.name.canonicalName): \($0.value)" }
        return FlightKey(key, validating: validating, kind: .whole(fields: fields))
    }
}

/// What a flight brings its callers.
enum FlightAnswer: Sendable {
    /// An answer each caller gets as it is: a body read whole, a 304 that freshened the stored
    /// response, a stale answer to an origin error.
    case whole(Resource)
    /// A response whose body its callers read as it arrives, those whose request it matches (by
    /// its `Vary`).
    case shared(SharedResponse)
    /// A response that cannot be shared: its body goes to the one caller that claims it, and
    /// the others send their own requests.
    case own(Claim<ResourceStream>)
}

/// A value that one of several takes.
final class Claim<Value: Sendable>: Sendable {
    private let value: Mutex<Value?>

    init(_ value: Value) {
        self.value = Mutex(value)
    }

    /// The value, to the first caller; `nil` to the others.
    func take() -> Value? {
        self.value.withLock { value in
            defer { value = nil }
            return value
        }
    }
}

extension ResourceLoader {
    /// The key of the flight that streamed loads of `url` join: for tests.
    func streamedFlight(_ url: URL) -> FlightKey? {
        ResponseKey(of: HTTPRequest(method: .get, url: url), transform: self.configuration.keyTransform).map {
            FlightKey($0, validating: false, kind: .streamed)
        }
    }

    /// The number of callers waiting for the head of the streamed flight for `url`: for tests.
    func callersOfStreamedFlight(_ url: URL) -> Int {
        self.streamedFlight(url).flatMap { self.flights.callers(of: $0) } ?? 0
    }

    /// The response that the streamed flight for `url` shares while its body arrives: for tests.
    func sharedResponse(_ url: URL) -> SharedResponse? {
        guard let flight = self.streamedFlight(url), case .shared(let shared)? = self.flights.answer(of: flight)
        else { return nil }
        return shared
    }
}
