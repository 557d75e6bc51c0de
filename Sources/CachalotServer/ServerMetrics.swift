import Cachalot
import CoreMetrics
import NIOCore

/// What the proxy counts through swift-metrics: requests by what the cache did, bytes served
/// from the cache and from the origin, how long the origin took to begin its answers, the
/// access log lines dropped, and the images refused because every image thread was busy.
struct ServerMetrics: Sendable {
    private let requests: [Outcome: Counter]
    private let bytesFromCache: Counter
    private let bytesFromOrigin: Counter
    private let originLatency: Timer
    private let droppedAccessLogLines: Counter
    private let imagesBusy: Counter

    /// What the cache did for a request, as the `cache` dimension of the request counter.
    enum Outcome: String, Sendable, CaseIterable {
        /// Answered from the cache without asking the origin (stale answers included).
        case hit
        /// Sent to the origin: a miss, a validation, a method the cache does not answer.
        case forward
        /// The proxy refused the request, or the origin failed.
        case error
    }

    init(_ configuration: MetricsConfiguration) {
        let (label, factory) = (configuration.label, configuration.factory)
        self.requests = Dictionary(
            uniqueKeysWithValues: Outcome.allCases.map { outcome in
                (
                    outcome,
                    Counter(label: "\(label)_requests", dimensions: [("cache", outcome.rawValue)], factory: factory)
                )
            }
        )
        self.bytesFromCache = Counter(label: "\(label)_bytes", dimensions: [("source", "cache")], factory: factory)
        self.bytesFromOrigin = Counter(label: "\(label)_bytes", dimensions: [("source", "origin")], factory: factory)
        self.originLatency = Timer(label: "\(label)_origin_head_seconds", factory: factory)
        self.droppedAccessLogLines = Counter(label: "\(label)_access_log_dropped", factory: factory)
        self.imagesBusy = Counter(label: "\(label)_images_busy", factory: factory)
    }

    /// Counts a request and the bytes of body it was sent.
    func request(_ outcome: Outcome, bytes: Int) {
        self.requests[outcome]?.increment()
        guard bytes > 0 else { return }
        switch outcome {
        case .hit: self.bytesFromCache.increment(by: bytes)
        case .forward: self.bytesFromOrigin.increment(by: bytes)
        case .error: break
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
