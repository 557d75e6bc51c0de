import Foundation

/// One comparison of the shared tier against a baseline, round after round, and its Markdown
/// tables.
struct Comparison {
    /// The heading of its table.
    let title: String
    /// What the subject and the baseline are, as the table's columns name them.
    let subjectName: String
    let baselineName: String
    /// The largest ratio of the subject's median to the baseline's that meets the goal; `nil`
    /// for a comparison reported without a goal.
    let goal: Double?
    var rounds: [RoundResult] = []

    var ratios: [Double] { self.rounds.map(\.ratio) }

    /// How many rounds met the goal.
    var roundsMeetingGoal: Int {
        guard let goal else { return 0 }
        return self.ratios.filter { $0 <= goal }.count
    }

    /// "met", or how often it was missed; "report" without a goal.
    var verdict: String {
        guard let goal else { return "report" }
        let met = self.roundsMeetingGoal
        if met == self.rounds.count { return "≤ \(format(goal, 1))×: met in every round" }
        if met == 0 { return "≤ \(format(goal, 1))×: **missed in every round**" }
        return "≤ \(format(goal, 1))×: **missed in \(self.rounds.count - met) of \(self.rounds.count) rounds**"
    }

    /// The per-round table of call times: medians, calls per second, the ratio of medians.
    func printCallTable() {
        print("#### \(self.title)\n")
        print(
            "| round | \(self.subjectName) p50 µs | \(self.baselineName) p50 µs | \(self.subjectName) calls/s "
                + "| \(self.baselineName) calls/s | ratio of p50s | calls each | failed |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for (number, round) in self.rounds.enumerated() {
            print(
                "| \(number + 1) | \(format(round.subject.median.microseconds, 1)) "
                    + "| \(format(round.baseline.median.microseconds, 1)) "
                    + "| \(grouped(round.subject.callsPerSecond)) | \(grouped(round.baseline.callsPerSecond)) "
                    + "| \(format(round.ratio, 2))× | \(round.subject.times.count + round.subject.failures) "
                    + "| \(round.subject.failures) / \(round.baseline.failures) |"
            )
        }
        self.printSummaryLine()
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
        self.printSummaryLine()
        self.printFailures()
    }

    private func printSummaryLine() {
        let ratios = self.ratios.sorted()
        guard let low = ratios.first, let high = ratios.last else { return }
        print(
            "\nRatio over \(ratios.count) rounds: \(format(low, 2))–\(format(high, 2))× "
                + "(median \(format(median(ratios), 2))×); goal \(self.verdict).\n"
        )
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
    print("| measurement | ratio over the rounds | median | goal |")
    print("|---|---:|---:|---|")
    for comparison in comparisons {
        let ratios = comparison.ratios.sorted()
        guard let low = ratios.first, let high = ratios.last else { continue }
        print(
            "| \(comparison.title) | \(format(low, 2))–\(format(high, 2))× | \(format(median(ratios), 2))× "
                + "| \(comparison.verdict) |"
        )
    }
    print()
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
