import CoreMetrics

/// Where a cache reports its swift-metrics counters and gauges.
///
/// ```swift
/// var configuration = MemoryCache<String, Data>.Configuration()
/// configuration.metrics = MetricsConfiguration(label: "images.memory")
/// ```
public struct MetricsConfiguration: Sendable {
    /// The prefix of every metric's label, such as `"images.memory"`. No default.
    public var label: String
    /// The factory that makes the metrics. Default: `MetricsSystem.factory`, the one the
    /// application bootstrapped.
    public var factory: any MetricsFactory

    /// Creates a metrics configuration.
    ///
    /// - Parameters:
    ///   - label: The prefix of every metric's label.
    ///   - factory: The factory that makes the metrics. Default: `MetricsSystem.factory`.
    public init(label: String, factory: any MetricsFactory = MetricsSystem.factory) {
        self.label = label
        self.factory = factory
    }
}
