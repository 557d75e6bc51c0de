import Foundation

/// One comparison of the shared tier against a baseline, round after round, and its Markdown
/// tables.
struct Comparison {
    /// The heading of its table.
    let title: String
    /// What the subject and the baseline are, as the table's columns name them.
    let subjectName: String
    let baselineName: String
    /// The largest ratio of the subject's time to the baseline's that meets the goal; `nil` for
    /// a comparison reported without a goal.
    let goal: Double?
    /// What ``Sample/counted`` counts, shown per call in a column of its own; `nil` for nothing.
    var countedName: String? = nil
    var rounds: [RoundResult] = []

    /// Each round's ratio of medians.
    var ratios: [Double] { self.rounds.map(\.ratio) }
    /// Each round's ratio of means.
    var meanRatios: [Double] { self.rounds.map(\.meanRatio) }

    /// Whether `ratios` met the goal in every round, or how often they missed it; "report"
    /// without a goal.
    func verdict(_ ratios: [Double]) -> String {
        guard let goal else { return "report" }
        let missed = ratios.filter { $0 > goal }.count
        if missed == 0 { return "≤ \(format(goal, 1))×: met in every round" }
        if missed == ratios.count { return "≤ \(format(goal, 1))×: **missed in every round**" }
        return "≤ \(format(goal, 1))×: **missed in \(missed) of \(ratios.count) rounds**"
    }

    /// The per-round table of call times: medians, calls per second (from the mean), and the
    /// ratios of the medians and of the means.
    func printCallTable() {
        print("#### \(self.title)\n")
        let counted = self.countedName.map { " \(self.subjectName) \($0) | \(self.baselineName) \($0) |" } ?? ""
        print(
            "| round | \(self.subjectName) p50 µs | \(self.baselineName) p50 µs | ratio of p50s "
                + "| \(self.subjectName) calls/s | \(self.baselineName) calls/s | ratio of means |\(counted) "
                + "calls each | failed |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|\(self.countedName == nil ? "" : "---:|---:|")---:|---:|")
        for (number, round) in self.rounds.enumerated() {
            let counts =
                self.countedName == nil
                ? ""
                : " \(grouped(round.subject.countedPerCall)) | \(grouped(round.baseline.countedPerCall)) |"
            print(
                "| \(number + 1) | \(format(round.subject.median.microseconds, 1)) "
                    + "| \(format(round.baseline.median.microseconds, 1)) | \(format(round.ratio, 2))× "
                    + "| \(grouped(round.subject.callsPerSecond)) | \(grouped(round.baseline.callsPerSecond)) "
                    + "| \(format(round.meanRatio, 2))× |\(counts) \(round.subject.times.count + round.subject.failures) "
                    + "| \(round.subject.failures) / \(round.baseline.failures) |"
            )
        }
        print()
        print(
            "Ratio of p50s over \(self.rounds.count) rounds: \(span(self.ratios)); goal \(self.verdict(self.ratios))."
        )
        print(
            "Ratio of means over \(self.rounds.count) rounds: \(span(self.meanRatios)); "
                + "goal \(self.verdict(self.meanRatios)).\n"
        )
        self.printFailures()
    }

    /// The per-round table of passes of `loads` loads each: loads per second at each side's
    /// median pass, and their ratio.
    func printPassTable(loads: Int) {
        print("#### \(self.title)\n")
        print(
            "| round | \(self.subjectName) loads/s | \(self.baselineName) loads/s | time ratio | passes each | failed |"
        )
        print("|---:|---:|---:|---:|---:|---:|")
        for (number, round) in self.rounds.enumerated() {
            let subject = Double(loads) / round.subject.median.seconds
            let baseline = Double(loads) / round.baseline.median.seconds
            print(
                "| \(number + 1) | \(grouped(subject)) | \(grouped(baseline)) | \(format(round.ratio, 2))× "
                    + "| \(round.subject.times.count + round.subject.failures) "
                    + "| \(round.subject.failures) / \(round.baseline.failures) |"
            )
        }
        print("\nTime ratio over \(self.rounds.count) rounds: \(span(self.ratios)).\n")
        self.printFailures()
    }

    private func printFailures() {
        for (number, round) in self.rounds.enumerated() {
            for (side, sample) in [(self.subjectName, round.subject), (self.baselineName, round.baseline)] {
                if let failure = sample.lastFailure {
                    print("Round \(number + 1), \(side): \(sample.failures) failed; the last: \(failure)\n")
                }
            }
        }
    }
}

/// Prints the summary table of `comparisons`: the range of their ratios and their goals.
func printSummary(_ comparisons: [Comparison]) {
    print("#### Summary\n")
    print(
        "| measurement | ratio of p50s over the rounds | goal, by p50s | ratio of means over the rounds | goal, by means |"
    )
    print("|---|---:|---|---:|---|")
    for comparison in comparisons {
        print(
            "| \(comparison.title) | \(span(comparison.ratios)) | \(comparison.verdict(comparison.ratios)) "
                + "| \(span(comparison.meanRatios)) | \(comparison.verdict(comparison.meanRatios)) |"
        )
    }
    print()
}

/// "low–high× (median m×)" of `ratios`.
func span(_ ratios: [Double]) -> String {
    let sorted = ratios.sorted()
    guard let low = sorted.first, let high = sorted.last else { return "–" }
    return "\(format(low, 2))–\(format(high, 2))× (median \(format(median(sorted), 2))×)"
}

/// The median of `values`, sorted or not.
func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
}

/// `value` with `digits` decimals.
func format(_ value: Double, _ digits: Int) -> String {
    String(format: "%.\(digits)f", value)
}

/// `value` rounded to a whole number, its thousands separated by commas.
func grouped(_ value: Double) -> String {
    guard value.isFinite else { return "–" }
    let digits = String(Int(value.rounded()))
    var result = ""
    for (index, digit) in digits.reversed().enumerated() {
        if index > 0, index.isMultiple(of: 3) { result.append(",") }
        result.append(digit)
    }
    return String(result.reversed())
}
