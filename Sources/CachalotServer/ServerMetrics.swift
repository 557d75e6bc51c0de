import Cachalot
import CoreMetrics
import NIOCore

/// What the proxy counts through swift-metrics: requests by what the cache did, bytes served
/// from the cache and from the origin, how long the origin took to begin its answers, the
/// access log lines dropped, and the images refused because every image thread was busy.
///
/// A class: every request reaches it, and a copy of a structure would retain each counter.
final class ServerMetrics: Sendable {
    /// The request counter of each ``Outcome``.
    private let hits: Counter
    private let forwards: Counter
    private let errors: Counter
    private let bytesFromCache: Counter
    private let bytesFromOrigin: Counter
    private let originLatency: Timer
    private let droppedAccessLogLines: Counter
    private let imagesBusy: Counter

    /// What the cache did for a request, as the `cache` dimension of the request counter.
    enum Outcome: String, Sendable {
        /// Answered from the cache without asking the origin (stale answers included).
        case hit
        /// Sent to the origin: a miss, a validation, a method the cache does not answer.
        case forward
        /// The proxy refused the request, or the origin failed.
        case error
    }

    init(_ configuration: MetricsConfiguration) {
        let (label, factory) = (configuration.label, configuration.factory)
        func requests(_ outcome: Outcome) -> Counter {
            Counter(label: "\(label)_requests", dimensions: [("cache", outcome.rawValue)], factory: factory)
        }
        self.hits = requests(.hit)
        self.forwards = requests(.forward)
        self.errors = requests(.error)
        self.bytesFromCache = Counter(label: "\(label)_bytes", dimensions: [("source", "cache")], factory: factory)
        self.bytesFromOrigin = Counter(label: "\(label)_bytes", dimensions: [("source", "origin")], factory: factory)
        self.originLatency = Timer(label: "\(label)_origin_head_seconds", factory: factory)
        self.droppedAccessLogLines = Counter(label: "\(label)_access_log_dropped", factory: factory)
        self.imagesBusy = Counter(label: "\(label)_images_busy", factory: factory)
    }

    /// Counts a request and the bytes of body it was sent.
    func request(_ outcome: Outcome, bytes: Int) {
        switch outcome {
        case .hit:
            self.hits.increment()
            if bytes > 0 { self.bytesFromCache.increment(by: bytes) }
        case .forward:
            self.forwards.increment()
            if bytes > 0 { self.bytesFromOrigin.increment(by: bytes) }
        case .error:
            self.errors.increment()
        }
    }

    /// Counts access log lines dropped because the log's output did not keep up.
    func accessLogDropped(lines: Int) {
        self.droppedAccessLogLines.increment(by: lines)
    }

    /// Counts an image request refused because every image thread was busy and the queue full.
    func imageRefusedAsBusy() {
        self.imagesBusy.increment()
    }

    /// Records how long the origin took to begin an answer.
    func originAnswered(after duration: Duration) {
        self.originLatency.recordNanoseconds(TimeAmount(duration).nanoseconds)
    }
}
