import Foundation

/// Reads and writes HTTP dates (RFC 9110 §5.6.7) without a `DateFormatter`, which is slow and
/// depends on the locale.
///
/// Reads all three forms a recipient must accept, exactly as RFC 9110's grammar spells them, and
/// writes the first:
///
/// ```
/// Sun, 06 Nov 1994 08:49:37 GMT    IMF-fixdate
/// Sunday, 06-Nov-94 08:49:37 GMT   RFC 850 (obsolete); a two-digit year more than 50 years
///                                  ahead is taken as the same year a century earlier
/// Sun Nov  6 08:49:37 1994         ANSI C's asctime() (obsolete)
/// ```
///
/// Each form is read at fixed positions: single spaces where the grammar has them, the comma,
/// the dashes of RFC 850 only, a two-digit day (a space and one digit in asctime), a four-digit
/// year (two digits in RFC 850 only), a short day name (a long one in RFC 850 only), `GMT` as
/// the only zone. Spaces and tabs around the whole value are not part of it and are skipped.
///
/// Names of days and months and `GMT` are matched in any case: RFC 9110 §5.6.7 specifies them as
/// case-sensitive, but RFC 9111 §4.2 asks a cache to match dates case-insensitively. The day
/// name is not checked against the date. Anything else (another time zone, a day that the month
/// does not have, a time out of range, trailing text) is not a date.
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

    private static func parse(_ value: UnsafeBufferPointer<UInt8>, now: Date) -> Date? {
        var lower = 0
        var upper = value.count
        while lower < upper, Self.isSpace(value[lower]) { lower += 1 }
        while upper > lower, Self.isSpace(value[upper - 1]) { upper -= 1 }
        let bytes = UnsafeBufferPointer(rebasing: value[lower..<upper])
        // asctime, the shortest form, has 24 bytes.
        guard bytes.count >= 24 else { return nil }
        // Where the day, month, year and time start, and how many digits the year has.
        let (day, month, year, time, yearDigits): (Int, Int, Int, Int, Int)
        if bytes[3] == UInt8(ascii: ",") {
            // IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
            guard bytes.count == 29, Self.isDayName(bytes, 0..<3, Self.shortDayNames),
                Self.spaces(bytes, 4, 7, 11, 16, 25), Self.equals(bytes, 26..<29, "GMT")
            else { return nil }
            (day, month, year, time, yearDigits) = (5, 8, 12, 17, 4)
        } else if bytes[3] == UInt8(ascii: " ") {
            // asctime: `Sun Nov  6 08:49:37 1994`, the day a space and a digit or two digits.
            guard bytes.count == 24, Self.isDayName(bytes, 0..<3, Self.shortDayNames),
                Self.spaces(bytes, 7, 10, 19, 19, 19)
            else { return nil }
            (month, day, time, year, yearDigits) = (4, 8, 11, 20, 4)
        } else {
            // RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`, after a long day name of 6 to 9 letters.
            guard let comma = (6...9).first(where: { bytes[$0] == UInt8(ascii: ",") }), bytes.count == comma + 24,
                Self.isDayName(bytes, 0..<comma, Self.longDayNames),
                Self.spaces(bytes, comma + 1, comma + 11, comma + 20, comma + 20, comma + 20),
                bytes[comma + 4] == UInt8(ascii: "-"), bytes[comma + 8] == UInt8(ascii: "-"),
                Self.equals(bytes, comma + 21..<comma + 24, "GMT")
            else { return nil }
            (day, month, year, time, yearDigits) = (comma + 2, comma + 5, comma + 9, comma + 12, 2)
        }
        // asctime's day may be a space and one digit.
        let dayStart = month < day && bytes[day] == UInt8(ascii: " ") ? day + 1 : day
        guard let monthNumber = Self.month(bytes, month..<month + 3),
            let dayNumber = Self.number(bytes, dayStart..<day + 2),
            var yearNumber = Self.number(bytes, year..<year + yearDigits),
            bytes[time + 2] == UInt8(ascii: ":"), bytes[time + 5] == UInt8(ascii: ":"),
            let hour = Self.number(bytes, time..<time + 2),
            let minute = Self.number(bytes, time + 3..<time + 5),
            let second = Self.number(bytes, time + 6..<time + 8),
            hour < 24, minute < 60, second <= 60
        else { return nil }
        if yearDigits == 2 {
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

    /// Whether `bytes[range]` is one of `names` (lowercased), in any case.
    private static func isDayName(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ names: [String]) -> Bool {
        names.contains { Self.equals(bytes, range, $0) }
    }

    /// Whether `bytes` has a space at each offset (five of them, some perhaps repeated: a
    /// variadic list would allocate).
    private static func spaces(
        _ bytes: UnsafeBufferPointer<UInt8>,
        _ a: Int,
        _ b: Int,
        _ c: Int,
        _ d: Int,
        _ e: Int
    )
        -> Bool
    {
        let space = UInt8(ascii: " ")
        return bytes[a] == space && bytes[b] == space && bytes[c] == space && bytes[d] == space && bytes[e] == space
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
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

    /// The decimal number that the digits `bytes[range]` spell, and `nil` if any is not a digit.
    private static func number(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int? {
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
