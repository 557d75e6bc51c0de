import ArgumentParser
import Foundation

/// A size in bytes, read from the command line in human units: `500MB`, `2GiB`, `10k`, `4096`.
struct ByteCount: ExpressibleByArgument {
    let bytes: Int

    init(bytes: Int) {
        self.bytes = bytes
    }

    init?(argument: String) {
        let text = argument.trimmingCharacters(in: .whitespaces).lowercased()
        let digits = text.prefix { $0.isNumber || $0 == "." }
        guard let number = Double(digits), number >= 0 else { return nil }
        let unit = text.dropFirst(digits.count).trimmingCharacters(in: .whitespaces)
        let multipliers: [String: Double] = [
            "": 1, "b": 1, "k": 1_000, "kb": 1_000, "kib": 1_024, "m": 1e6, "mb": 1e6, "mib": 1_048_576,
            "g": 1e9, "gb": 1e9, "gib": 1_073_741_824, "t": 1e12, "tb": 1e12, "tib": 1_099_511_627_776,
        ]
        guard let multiplier = multipliers[unit], number * multiplier < Double(Int.max), number * multiplier >= 1
        else { return nil }
        self.bytes = Int(number * multiplier)
    }

    static var defaultCompletionKind: CompletionKind { .default }

    /// `bytes` for people: `512 B`, `32.0 KiB`, `1.5 MiB`.
    static func format(_ bytes: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1_024, unit < units.count - 1 {
            value /= 1_024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : "\((value * 10).rounded() / 10) \(units[unit])"
    }
}

/// `duration` for people: `850 µs`, `12.3 ms`, `1.4 s`.
func formatDuration(_ duration: Duration) -> String {
    let seconds = duration.seconds
    if seconds < 0.001 { return "\(Int((seconds * 1e6).rounded())) µs" }
    if seconds < 1 { return "\((seconds * 10_000).rounded() / 10) ms" }
    return "\((seconds * 10).rounded() / 10) s"
}

/// A span of time, read from the command line in human units: `45s`, `30m`, `12h`, `7d`, `2w`,
/// or several together, such as `1d12h`.
struct TimeSpan: ExpressibleByArgument {
    let seconds: TimeInterval

    init?(argument: String) {
        let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800]
        var total: TimeInterval = 0
        var number = ""
        var sawPart = false
        for character in argument.lowercased() where character != " " {
            if character.isNumber || character == "." {
                number.append(character)
            } else if let unit = units[character], let value = Double(number) {
                total += value * unit
                number = ""
                sawPart = true
            } else {
                return nil
            }
        }
        // At most a thousand years: enough for any age, and far inside what dates can hold.
        guard number.isEmpty, sawPart, total.isFinite, total > 0, total <= 1_000 * 31_557_600 else { return nil }
        self.seconds = total
    }

    static var defaultCompletionKind: CompletionKind { .default }
}

/// A number of seconds for people, in its two largest units: `45s`, `12m 5s`, `3h 20m`, `2d 4h`.
func formatSeconds(_ seconds: TimeInterval) -> String {
    let whole = seconds.isFinite ? Int(min(max(0, seconds.rounded(.down)), 1e15)) : 0
    let parts = [(whole / 86_400, "d"), (whole / 3_600 % 24, "h"), (whole / 60 % 60, "m"), (whole % 60, "s")]
    guard let first = parts.firstIndex(where: { $0.0 > 0 }) else { return "0s" }
    let shown = parts[first...].prefix(2).filter { $0.0 > 0 }
    return shown.map { "\($0.0)\($0.1)" }.joined(separator: " ")
}

extension Duration {
    /// The duration in seconds, with its fraction.
    var seconds: Double {
        Double(self.components.seconds) + Double(self.components.attoseconds) / 1e18
    }
}

extension Int {
    /// The sum of `values`, or the largest `Int` if it is larger: for counts read from a file.
    static func saturatingSum(_ values: Int...) -> Int {
        values.reduce(0) { total, value in
            let (sum, overflow) = total.addingReportingOverflow(value)
            return overflow ? (value < 0 ? .min : .max) : sum
        }
    }
}
