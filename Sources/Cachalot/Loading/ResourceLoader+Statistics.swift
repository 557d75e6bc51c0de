import CoreMetrics
import Synchronization

extension ResourceLoader {
    /// What a loader has done since it was made.
    public struct Statistics: Sendable, Hashable, Codable {
        /// Loads asked for.
        public var requests = 0
        /// Loads answered by a fresh response from memory.
        public var memoryHits = 0
        /// Loads answered by a fresh response from disk.
        public var diskHits = 0
        /// Loads answered by a fresh response from a shared tier.
        public var sharedHits = 0
        /// Loads that asked the shared tiers, having found nothing to use in memory or on disk.
        public var sharedLookups = 0
        /// Responses that were to be stored in the shared tiers but were not: a tier failed, or
        /// more than 64 MiB of bodies were already on their way there.
        public var sharedStorageFailures = 0
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
        /// Responses that were to be stored on disk but could not be (a full disk, an
        /// unwritable directory); their loads were answered all the same.
        public var storageFailures = 0

        /// Statistics of nothing done yet.
        public init() {}
    }
}

/// The loader's statistics, and the swift-metrics counters that mirror them. Each count is an
/// atomic of its own, so that a hit pays no lock for being counted; a snapshot reads them one by
/// one.
final class LoaderCounters: Sendable {
    private let requests = Atomic<Int>(0)
    private let memoryHits = Atomic<Int>(0)
    private let diskHits = Atomic<Int>(0)
    private let sharedHits = Atomic<Int>(0)
    private let sharedLookups = Atomic<Int>(0)
    private let sharedStorageFailures = Atomic<Int>(0)
    private let misses = Atomic<Int>(0)
    private let revalidations = Atomic<Int>(0)
    private let notModified = Atomic<Int>(0)
    private let staleAnswers = Atomic<Int>(0)
    private let bytesFromNetwork = Atomic<Int>(0)
    private let bytesFromCache = Atomic<Int>(0)
    private let storageFailures = Atomic<Int>(0)
    private let metrics: Metrics?

    private struct Metrics: Sendable {
        let requests: Counter
        let memoryHits: Counter
        let diskHits: Counter
        let sharedHits: Counter
        let sharedLookups: Counter
        let sharedStorageFailures: Counter
        let misses: Counter
        let revalidations: Counter
        let notModified: Counter
        let staleAnswers: Counter
        let bytesFromNetwork: Counter
        let bytesFromCache: Counter
        let storageFailures: Counter

        init(_ configuration: MetricsConfiguration) {
            let (label, factory) = (configuration.label, configuration.factory)
            self.requests = Counter(label: "\(label).requests", factory: factory)
            self.memoryHits = Counter(label: "\(label).hits", dimensions: [("tier", "memory")], factory: factory)
            self.diskHits = Counter(label: "\(label).hits", dimensions: [("tier", "disk")], factory: factory)
            self.sharedHits = Counter(label: "\(label).hits", dimensions: [("tier", "shared")], factory: factory)
            self.sharedLookups = Counter(label: "\(label).shared_lookups", factory: factory)
            self.sharedStorageFailures = Counter(label: "\(label).shared_storage_failures", factory: factory)
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
            self.storageFailures = Counter(label: "\(label).storage_failures", factory: factory)
        }
    }

    init(_ configuration: MetricsConfiguration?) {
        self.metrics = configuration.map(Metrics.init)
    }

    var snapshot: ResourceLoader.Statistics {
        var statistics = ResourceLoader.Statistics()
        statistics.requests = self.requests.load(ordering: .relaxed)
        statistics.memoryHits = self.memoryHits.load(ordering: .relaxed)
        statistics.diskHits = self.diskHits.load(ordering: .relaxed)
        statistics.sharedHits = self.sharedHits.load(ordering: .relaxed)
        statistics.sharedLookups = self.sharedLookups.load(ordering: .relaxed)
        statistics.sharedStorageFailures = self.sharedStorageFailures.load(ordering: .relaxed)
        statistics.misses = self.misses.load(ordering: .relaxed)
        statistics.revalidations = self.revalidations.load(ordering: .relaxed)
        statistics.notModified = self.notModified.load(ordering: .relaxed)
        statistics.staleAnswers = self.staleAnswers.load(ordering: .relaxed)
        statistics.bytesFromNetwork = self.bytesFromNetwork.load(ordering: .relaxed)
        statistics.bytesFromCache = self.bytesFromCache.load(ordering: .relaxed)
        statistics.storageFailures = self.storageFailures.load(ordering: .relaxed)
        return statistics
    }

    func request() {
        self.requests.wrappingAdd(1, ordering: .relaxed)
        self.metrics?.requests.increment()
    }

    /// Counts an answer by where it came from.
    func answer(_ source: Resource.Source, bytes: Int) {
        switch source {
        case .memory:
            self.memoryHits.wrappingAdd(1, ordering: .relaxed)
            self.metrics?.memoryHits.increment()
        case .disk:
            self.diskHits.wrappingAdd(1, ordering: .relaxed)
            self.metrics?.diskHits.increment()
        case .shared:
            self.sharedHits.wrappingAdd(1, ordering: .relaxed)
            self.metrics?.sharedHits.increment()
        case .network:
            self.misses.wrappingAdd(1, ordering: .relaxed)
            self.metrics?.misses.increment()
        case .stale:
            self.staleAnswers.wrappingAdd(1, ordering: .relaxed)
            self.metrics?.staleAnswers.increment()
        case .revalidated, .generated:
            break
        }
        if source != .network && source != .generated {
            self.bytesFromCache.wrappingAdd(bytes, ordering: .relaxed)
            self.metrics?.bytesFromCache.increment(by: bytes)
        }
    }

    /// Counts a load that asked the shared tiers.
    func sharedLookup() {
        self.sharedLookups.wrappingAdd(1, ordering: .relaxed)
        self.metrics?.sharedLookups.increment()
    }

    /// Counts a response that could not be stored in the shared tiers.
    func sharedStorageFailure() {
        self.sharedStorageFailures.wrappingAdd(1, ordering: .relaxed)
        self.metrics?.sharedStorageFailures.increment()
    }

    /// Counts a conditional request, and whether its answer was 304.
    func validation(notModified: Bool) {
        self.revalidations.wrappingAdd(1, ordering: .relaxed)
        self.metrics?.revalidations.increment()
        if notModified {
            self.notModified.wrappingAdd(1, ordering: .relaxed)
            self.metrics?.notModified.increment()
        }
    }

    func received(_ bytes: Int) {
        self.bytesFromNetwork.wrappingAdd(bytes, ordering: .relaxed)
        self.metrics?.bytesFromNetwork.increment(by: bytes)
    }

    /// Counts a response that could not be stored on disk.
    func storageFailure() {
        self.storageFailures.wrappingAdd(1, ordering: .relaxed)
        self.metrics?.storageFailures.increment()
    }
}
