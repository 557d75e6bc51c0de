import CoreMetrics
import Synchronization

extension ResourceLoader {
    /// What a loader has done since it was made.
    public struct Statistics: Sendable, Hashable {
        /// Loads asked for.
        public var requests = 0
        /// Loads answered by a fresh response from memory.
        public var memoryHits = 0
        /// Loads answered by a fresh response from disk.
        public var diskHits = 0
        /// Loads answered with a whole response from the origin (not a 304): nothing stored
        /// could be used, or the policy or method asked the origin.
        public var misses = 0
        /// Conditional requests sent to validate a stored response.
        public var revalidations = 0
        /// Validations the origin answered with 304 (Not Modified).
        public var notModified = 0
        /// Loads answered by a stale stored response.
        public var staleAnswers = 0
        /// Body bytes received from the network.
        public var bytesFromNetwork = 0
        /// Body bytes answered from memory or disk.
        public var bytesFromCache = 0
    }
}

/// The loader's statistics, and the swift-metrics counters that mirror them.
final class LoaderCounters: Sendable {
    private let totals = Mutex(ResourceLoader.Statistics())
    private let metrics: Metrics?

    private struct Metrics: Sendable {
        let requests: Counter
        let memoryHits: Counter
        let diskHits: Counter
        let misses: Counter
        let revalidations: Counter
        let notModified: Counter
        let staleAnswers: Counter
        let bytesFromNetwork: Counter
        let bytesFromCache: Counter

        init(_ configuration: MetricsConfiguration) {
            let (label, factory) = (configuration.label, configuration.factory)
            self.requests = Counter(label: "\(label).requests", factory: factory)
            self.memoryHits = Counter(label: "\(label).hits", dimensions: [("tier", "memory")], factory: factory)
            self.diskHits = Counter(label: "\(label).hits", dimensions: [("tier", "disk")], factory: factory)
            self.misses = Counter(label: "\(label).misses", factory: factory)
            self.revalidations = Counter(label: "\(label).revalidations", factory: factory)
            self.notModified = Counter(label: "\(label).not_modified", factory: factory)
            self.staleAnswers = Counter(label: "\(label).stale", factory: factory)
            self.bytesFromNetwork = Counter(
                label: "\(label).bytes",
                dimensions: [("source", "network")],
                factory: factory
            )
            self.bytesFromCache = Counter(label: "\(label).bytes", dimensions: [("source", "cache")], factory: factory)
        }
    }

    init(_ configuration: MetricsConfiguration?) {
        self.metrics = configuration.map(Metrics.init)
    }

    var snapshot: ResourceLoader.Statistics {
        self.totals.withLock { $0 }
    }

    func request() {
        self.totals.withLock { $0.requests += 1 }
        self.metrics?.requests.increment()
    }

    /// Counts an answer by where it came from.
    func answer(_ source: Resource.Source, bytes: Int) {
        self.totals.withLock { totals in
            switch source {
            case .memory: totals.memoryHits += 1
            case .disk: totals.diskHits += 1
            case .network: totals.misses += 1
            case .stale: totals.staleAnswers += 1
            case .revalidated, .generated: break
            }
            if source != .network && source != .generated { totals.bytesFromCache += bytes }
        }
        guard let metrics = self.metrics else { return }
        switch source {
        case .memory: metrics.memoryHits.increment()
        case .disk: metrics.diskHits.increment()
        case .network: metrics.misses.increment()
        case .stale: metrics.staleAnswers.increment()
        case .revalidated, .generated: break
        }
        if source != .network && source != .generated { metrics.bytesFromCache.increment(by: bytes) }
    }

    /// Counts a conditional request, and whether its answer was 304.
    func validation(notModified: Bool) {
        self.totals.withLock { totals in
            totals.revalidations += 1
            if notModified { totals.notModified += 1 }
        }
        self.metrics?.revalidations.increment()
        if notModified { self.metrics?.notModified.increment() }
    }

    func received(_ bytes: Int) {
        self.totals.withLock { $0.bytesFromNetwork += bytes }
        self.metrics?.bytesFromNetwork.increment(by: bytes)
    }
}
