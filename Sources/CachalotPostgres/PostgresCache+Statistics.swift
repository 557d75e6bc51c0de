import Cachalot
import CoreMetrics
import Synchronization

extension PostgresCache {
    /// What a ``PostgresCache`` has done since it was made, in this process.
    public struct Statistics: Sendable, Hashable {
        /// Reads that found an entry.
        public var hits = 0
        /// Reads that found none (or one damaged or expired).
        public var misses = 0
        /// Entries written.
        public var writes = 0
        /// Rows found damaged (another key, a wrong checksum), read as misses and removed.
        public var corruptEntries = 0
        /// Rows whose HMAC did not verify under ``Configuration/signingKey`` (written without the
        /// key, with another, or by someone else), read as misses.
        public var unverifiedEntries = 0
        /// Entries the trims removed, for the size or the age limit.
        public var trimmed = 0
        /// Operations that failed or timed out, or were skipped while a database was down.
        public var failures = 0
        /// Times a database went down (each logged once).
        public var outages = 0

        /// Statistics of nothing done yet.
        public init() {}
    }

    /// The counts, and the swift-metrics counters that mirror them.
    final class Counters: Sendable {
        private let counts = Mutex(Statistics())
        private let metrics: [String: Counter]

        init(_ configuration: MetricsConfiguration?) {
            var metrics: [String: Counter] = [:]
            if let configuration {
                for label in [
                    "hits", "misses", "writes", "corrupt_entries", "unverified_entries", "trimmed", "failures",
                    "outages",
                ] {
                    metrics[label] = Counter(label: "\(configuration.label).\(label)", factory: configuration.factory)
                }
            }
            self.metrics = metrics
        }

        private func add(_ count: WritableKeyPath<Statistics, Int>, _ label: String, _ amount: Int = 1) {
            guard amount > 0 else { return }
            self.counts.withLock { $0[keyPath: count] += amount }
            self.metrics[label]?.increment(by: amount)
        }

        func hit() { self.add(\.hits, "hits") }
        func miss() { self.add(\.misses, "misses") }
        func write() { self.add(\.writes, "writes") }
        func corrupt() { self.add(\.corruptEntries, "corrupt_entries") }
        func unverified() { self.add(\.unverifiedEntries, "unverified_entries") }
        func trimmed(_ count: Int) { self.add(\.trimmed, "trimmed", count) }
        func failure() { self.add(\.failures, "failures") }
        func outage() { self.add(\.outages, "outages") }

        var snapshot: Statistics {
            self.counts.withLock { $0 }
        }
    }
}
