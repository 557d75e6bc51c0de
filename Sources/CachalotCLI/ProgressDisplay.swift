import Foundation
import Synchronization

/// What `cachalot prefetch` shows while it works, on standard error: a progress bar redrawn in
/// place on a terminal, else a line for each URL as it finishes.
final class ProgressDisplay: Sendable {
    enum Style {
        /// A bar redrawn in place: count, bytes, rate and time left.
        case bar
        /// A line for each URL as it finishes.
        case lines
        /// Nothing.
        case none
    }

    private struct State {
        var finished = 0
        /// Bytes of finished loads, and of loads in flight by index.
        var finishedBytes = 0
        var inFlight: [Int: Int] = [:]
        var lastDrawn: ContinuousClock.Instant?
    }

    private let style: Style
    private let total: Int
    private let start = ContinuousClock.now
    private let state = Mutex(State())

    init(style: Style, total: Int) {
        self.style = style
        self.total = total
    }

    /// The load at `index` has received `bytes` of its body so far.
    func received(_ bytes: Int, index: Int) {
        guard self.style == .bar else { return }
        let line: String? = self.state.withLock { state in
            state.inFlight[index] = bytes
            return self.bar(&state, force: false)
        }
        if let line { Self.write(line) }
    }

    /// The load at `index` has finished with `outcome`.
    func finished(_ outcome: PrefetchCommand.Outcome, index: Int) {
        let line: String? = self.state.withLock { state in
            state.finished += 1
            state.inFlight[index] = nil
            state.finishedBytes += outcome.bytes
            switch self.style {
            case .bar: return self.bar(&state, force: true)
            case .lines: return outcome.line + "\n"
            case .none: return nil
            }
        }
        if let line { Self.write(line) }
    }

    /// Clears the bar, before the summary or after an interruption.
    func clear() {
        if self.style == .bar { Self.write("\r\u{1B}[K") }
    }

    /// The bar's line if it is due (at most ten a second, or when `force`d).
    private func bar(_ state: inout State, force: Bool) -> String? {
        let now = ContinuousClock.now
        if !force, let last = state.lastDrawn, now - last < .milliseconds(100) { return nil }
        state.lastDrawn = now
        let elapsed = (now - self.start).seconds
        let bytes = state.finishedBytes + state.inFlight.values.reduce(0, +)
        let width = 24
        let filled = self.total == 0 ? width : width * state.finished / self.total
        var line = "\r[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
        line += " \(state.finished)/\(self.total)  \(ByteCount.format(bytes))"
        if elapsed > 0 { line += "  \(ByteCount.format(Int(Double(bytes) / elapsed)))/s" }
        if state.finished > 0, state.finished < self.total {
            let left = elapsed / Double(state.finished) * Double(self.total - state.finished)
            line += "  \(formatSeconds(left.rounded(.up))) left"
        }
        return line + "\u{1B}[K"
    }

    private static func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
