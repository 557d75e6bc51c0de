import Foundation

/// Reads and writes HTTP dates (RFC 9110 §5.6.7) without a `DateFormatter`, which is slow and
/// depends on the locale.
///
/// Reads all three forms a recipient must accept, and writes the first:
///
/// ```
/// Sun, 06 Nov 1994 08:49:37 GMT    IMF-fixdate
/// Sunday, 06-Nov-94 08:49:37 GMT   RFC 850 (obsolete); a two-digit year more than 50 years
///                                  ahead is taken as the same year a century earlier
/// Sun Nov  6 08:49:37 1994         ANSI C's asctime() (obsolete)
/// ```
///
/// Names of days and months are accepted in any case; the day name is not checked against
/// the date. Anything else (another time zone, a day that the month does not have, a time out
/// of range, trailing text) is not a date.
public enum HTTPDate {
    /// The date that `text` denotes, or `nil` if it is not an HTTP date in one of the three forms.
    ///
    /// - Parameters:
    ///   - text: A field value such as that of `Date`, `Expires` or `Last-Modified`.
    ///   - now: The present, against which a two-digit year is read. Default: the system's time.
    public static func parse(_ text: some StringProtocol, now: Date = Date()) -> Date? {
        var text = String(text)
        return text.withUTF8 { Self.parse($0, now: now) }
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>, now: Date) -> Date? {
        // Up to six tokens, split at spaces, tabs, commas and hyphens, as ranges of `bytes`.
        var tokens: [Range<Int>] = []
        tokens.reserveCapacity(6)
        var start: Int?
        for index in 0...bytes.count {
            let isSeparator =
                index == bytes.count || bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t")
                || bytes[index] == UInt8(ascii: ",") || bytes[index] == UInt8(ascii: "-")
            if isSeparator {
                if let first = start {
                    guard tokens.count < 6 else { return nil }
                    tokens.append(first..<index)
                    start = nil
                }
            } else if start == nil {
                start = index
            }
        }
        guard tokens.count >= 5, Self.isDayName(bytes, tokens[0]) else { return nil }
        let (day, month, year, time): (Range<Int>, Range<Int>, Range<Int>, Range<Int>)
        if tokens.count == 6 {
            // IMF-fixdate or RFC 850: day month year time GMT.
            guard Self.equals(bytes, tokens[5], "GMT") else { return nil }
            (day, month, year, time) = (tokens[1], tokens[2], tokens[3], tokens[4])
        } else {
            // asctime: month day time year.
            (month, day, time, year) = (tokens[1], tokens[2], tokens[3], tokens[4])
        }
        guard let monthNumber = Self.month(bytes, month), let dayNumber = Self.number(bytes, day, digits: 1...2),
            var yearNumber = Self.number(bytes, year, digits: 2...4), year.count != 3,
            time.count == 8, bytes[time.lowerBound + 2] == UInt8(ascii: ":"),
            bytes[time.lowerBound + 5] == UInt8(ascii: ":"),
            let hour = Self.number(bytes, time.lowerBound..<time.lowerBound + 2, digits: 2...2),
            let minute = Self.number(bytes, time.lowerBound + 3..<time.lowerBound + 5, digits: 2...2),
            let second = Self.number(bytes, time.lowerBound + 6..<time.lowerBound + 8, digits: 2...2),
            hour < 24, minute < 60, second <= 60
        else { return nil }
        if year.count == 2 {
            yearNumber += 1900
            let currentYear = Self.year(of: now)
            while yearNumber < currentYear - 49 { yearNumber += 100 }
        }
        guard dayNumber >= 1, dayNumber <= Self.daysIn(month: monthNumber, year: yearNumber) else { return nil }
        let days = Self.days(fromYear: yearNumber, month: monthNumber, day: dayNumber)
        // A leap second is read as the last second of its minute.
        let seconds = days * 86_400 + hour * 3_600 + minute * 60 + min(second, 59)
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// `date` as an IMF-fixdate, truncated to the second: `Sun, 06 Nov 1994 08:49:37 GMT`.
    public static func format(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = Self.civil(fromDays: days)
        // 1970-01-01 was a Thursday.
        let weekday = ((days % 7) + 7 + 4) % 7
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let yearText = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
        return "\(Self.dayNames[weekday]), \(two(day)) \(Self.monthNames[month - 1]) \(yearText) "
            + "\(two(secondOfDay / 3_600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }

    private static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longDayNames = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
    private static let shortDayNames = Self.longDayNames.map { String($0.prefix(3)) }
    private static let monthNames = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]

    /// Whether `bytes[range]` is a day's name, short or long, in any case.
    private static func isDayName(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Bool {
        let names = range.count == 3 ? Self.shortDayNames : Self.longDayNames
        return names.contains { Self.equals(bytes, range, $0) }
    }

    /// The number (1 to 12) of the month `bytes[range]` names, in any case.
    private static func month(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int? {
        Self.monthNames.firstIndex { Self.equals(bytes, range, $0) }.map { $0 + 1 }
    }

    /// Whether `bytes[range]` is the ASCII `word`, ignoring case.
    private static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ word: String) -> Bool {
        guard range.count == word.utf8.count else { return false }
        return zip(range, word.utf8).allSatisfy { index, expected in bytes[index] | 0x20 == expected | 0x20 }
    }

    /// The decimal number `bytes[range]` spells with a count of digits in `digits`, and nothing
    /// else.
    private static func number(
        _ bytes: UnsafeBufferPointer<UInt8>,
        _ range: Range<Int>,
        digits: ClosedRange<Int>
    ) -> Int? {
        guard digits.contains(range.count) else { return nil }
        var value = 0
        for index in range {
            let byte = bytes[index]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// The year of `now`, held to the years a date can spell (0 to 9999), and 1970 if `now` is
    /// not a number. A present read from damaged metadata (a stored response's time, which can
    /// be any `Double`) neither traps converting to `Int` nor makes the century loop run long.
    private static func year(of now: Date) -> Int {
        let days = (now.timeIntervalSince1970 / 86_400).rounded(.down)
        guard !days.isNaN else { return 1970 }
        return Self.civil(fromDays: Int(min(max(days, Self.firstDay), Self.lastDay))).year
    }

    /// 0000-01-01, in days since 1970-01-01.
    private static let firstDay: Double = -719_528
    /// 9999-12-31, in days since 1970-01-01.
    private static let lastDay: Double = 2_932_896

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a date in the proleptic Gregorian calendar (Howard Hinnant's
    /// `days_from_civil`).
    private static func days(fromYear year: Int, month: Int, day: Int) -> Int {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The inverse of ``days(fromYear:month:day:)`` (Howard Hinnant's `civil_from_days`).
    private static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
