import CoreMetrics
import Synchronization

/// The swift-metrics counters and gauges of one ``MemoryCache``, made when the configuration
/// names ``MemoryCache/Configuration/metrics``.
@usableFromInline
final class MemoryCacheMetrics: Sendable {
    private let hits: Counter
    private let misses: Counter
    private let insertions: Counter
    private let costEvictions: Counter
    private let countEvictions: Counter
    private let expiryEvictions: Counter
    private let pressureEvictions: Counter
    private let cost: Gauge
    private let count: Gauge
    /// The cache's totals, kept here so that a gauge can be recorded without visiting shards.
    private let totals = Mutex((cost: 0, count: 0))

    init(_ configuration: MetricsConfiguration) {
        let (label, factory) = (configuration.label, configuration.factory)
        self.hits = Counter(label: "\(label).hits", factory: factory)
        self.misses = Counter(label: "\(label).misses", factory: factory)
        self.insertions = Counter(label: "\(label).insertions", factory: factory)
        let evictions = "\(label).evictions"
        self.costEvictions = Counter(label: evictions, dimensions: [("reason", "cost")], factory: factory)
        self.countEvictions = Counter(label: evictions, dimensions: [("reason", "count")], factory: factory)
        self.expiryEvictions = Counter(label: evictions, dimensions: [("reason", "expiry")], factory: factory)
        self.pressureEvictions = Counter(label: evictions, dimensions: [("reason", "pressure")], factory: factory)
        self.cost = Gauge(label: "\(label).cost", factory: factory)
        self.count = Gauge(label: "\(label).count", factory: factory)
    }

    /// Reports a hit counted outside the shard's statistics.
    @usableFromInline
    func recordHit() {
        self.hits.increment()
    }

    /// Reports a miss counted outside the shard's statistics.
    @usableFromInline
    func recordMiss() {
        self.misses.increment()
    }

    /// Reports what one call changed in one shard.
    @usableFromInline
    func record(_ change: MemoryCacheStatistics) {
        Self.add(change.hits, to: self.hits)
        Self.add(change.misses, to: self.misses)
        Self.add(change.insertions, to: self.insertions)
        Self.add(change.evictions.cost, to: self.costEvictions)
        Self.add(change.evictions.count, to: self.countEvictions)
        Self.add(change.evictions.expiry, to: self.expiryEvictions)
        Self.add(change.evictions.pressure, to: self.pressureEvictions)
        guard change.totalCost != 0 || change.count != 0 else { return }
        let totals = self.totals.withLock { totals in
            totals.cost += change.totalCost
            totals.count += change.count
            return totals
        }
        self.cost.record(totals.cost)
        self.count.record(totals.count)
    }

    private static func add(_ amount: Int, to counter: Counter) {
        if amount > 0 { counter.increment(by: amount) }
    }
}
