import Foundation

/// The times one side of a comparison took in one round: one per call that succeeded, and a
/// count of the calls that threw (left out of the times).
struct Sample {
    var times: [Duration] = []
    var failures = 0
    var lastFailure: String?
    /// What a counter read around this side's blocks grew by, summed (see ``interleaved``).
    var counted: Int64 = 0

    /// The counter's growth per call.
    var countedPerCall: Double {
        let calls = self.times.count + self.failures
        return calls > 0 ? Double(self.counted) / Double(calls) : 0
    }

    /// The median time of a call.
    var median: Duration {
        guard !self.times.isEmpty else { return .zero }
        let sorted = self.times.sorted()
        let middle = sorted.count / 2
        return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
    }

    /// The time under which `fraction` of the calls took (nearest rank).
    func percentile(_ fraction: Double) -> Duration {
        guard !self.times.isEmpty else { return .zero }
        let sorted = self.times.sorted()
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    /// The mean time of a call.
    var mean: Duration {
        self.times.isEmpty ? .zero : self.times.reduce(Duration.zero, +) / self.times.count
    }

    /// Calls per second over the time of the calls that succeeded.
    var callsPerSecond: Double {
        let total = self.times.reduce(Duration.zero, +)
        return total > .zero ? Double(self.times.count) / total.seconds : 0
    }

    /// Times `operation` once and records the time, or the failure if it throws.
    mutating func time(_ operation: () async throws -> Void) async {
        let clock = ContinuousClock()
        let start = clock.now
        do {
            try await operation()
            self.times.append(clock.now - start)
        } catch {
            self.failures += 1
            self.lastFailure = "\(error)"
        }
    }
}

/// What the subject and its baseline measured in one round.
struct RoundResult {
    var subject = Sample()
    var baseline = Sample()

    /// The subject's median over the baseline's: above 1, the subject is slower.
    var ratio: Double {
        let baseline = self.baseline.median
        return baseline > .zero ? self.subject.median / baseline : .infinity
    }

    /// The subject's mean over the baseline's, which counts the slow calls the medians leave out.
    var meanRatio: Double {
        let baseline = self.baseline.mean
        return baseline > .zero ? self.subject.mean / baseline : .infinity
    }
}

/// Times `count` calls of `subject` and `count` calls of `baseline`, one call at a time, in
/// blocks of `block` calls that alternate which of the two goes first, so that both see the
/// same drift of a noisy machine. Each side is given the call's index, 0 to `count - 1`.
///
/// If `counter` is given, it is read (untimed) before and after every block, and what it grew
/// by is added to that side's ``Sample/counted``.
func interleaved(
    count: Int,
    block: Int,
    counter: (() async throws -> Int64)? = nil,
    subject: (Int) async throws -> Void,
    baseline: (Int) async throws -> Void
) async throws -> RoundResult {
    var result = RoundResult()
    var start = 0
    var blockNumber = 0
    func run(_ calls: Range<Int>, _ operation: (Int) async throws -> Void, into sample: inout Sample) async throws {
        let before = try await counter?() ?? 0
        for call in calls { await sample.time { try await operation(call) } }
        let after = try await counter?() ?? 0
        sample.counted += after - before
    }
    while start < count {
        let calls = start..<min(start + block, count)
        if blockNumber.isMultiple(of: 2) {
            try await run(calls, subject, into: &result.subject)
            try await run(calls, baseline, into: &result.baseline)
        } else {
            try await run(calls, baseline, into: &result.baseline)
            try await run(calls, subject, into: &result.subject)
        }
        start = calls.upperBound
        blockNumber += 1
    }
    return result
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let (seconds, attoseconds) = self.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// The duration in microseconds.
    var microseconds: Double { self.seconds * 1e6 }
}

/// An error of the benchmark's own: a setup that did not give what the measurement needs.
struct BenchmarkFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
