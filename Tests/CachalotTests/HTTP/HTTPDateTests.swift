import Foundation
import Testing

@testable import Cachalot

@Suite("HTTPDate")
struct HTTPDateTests {
    static let example = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT

    @Test(
        "all three forms of RFC 9110 read as the same moment",
        arguments: ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"]
    )
    func threeForms(text: String) {
        #expect(HTTPDate.parse(text, now: Messages.start) == Self.example)
    }

    @Test("writing gives an IMF-fixdate that reads back")
    func format() {
        #expect(HTTPDate.format(Self.example) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        for seconds in stride(from: -86_400.0 * 800, to: 86_400 * 40_000, by: 86_400 * 37.3 + 4_321) {
            let date = Date(timeIntervalSince1970: seconds.rounded(.down))
            #expect(HTTPDate.parse(HTTPDate.format(date)) == date)
        }
    }

    @Test("a two-digit year more than 50 years ahead belongs to the century before")
    func twoDigitYears() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)  // 2027
        // 2076 is 49 years ahead: kept. 2080 would be 53 years ahead: 1980.
        #expect(
            HTTPDate.parse("Wednesday, 01-Jan-76 00:00:00 GMT", now: now).map(HTTPDate.format)
                == "Wed, 01 Jan 2076 00:00:00 GMT"
        )
        #expect(
            HTTPDate.parse("Tuesday, 01-Jan-80 00:00:00 GMT", now: now).map(HTTPDate.format)
                == "Tue, 01 Jan 1980 00:00:00 GMT"
        )
        #expect(
            HTTPDate.parse("Friday, 01-Jan-99 00:00:00 GMT", now: now).map(HTTPDate.format)
                == "Fri, 01 Jan 1999 00:00:00 GMT"
        )
    }

    @Test(
        "anything else is not a date",
        arguments: [
            "", "0", "-1", "tomorrow", "Sun, 06 Nov 1994 08:49:37 CET", "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 29 Feb 1995 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Nov 1994 08:49:37 GMT extra", "Xyz, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 199 08:49:37 GMT", "Sun, 6a Nov 1994 08:49:37 GMT",
            "Sun, 00 Nov 1994 08:49:37 GMT",
        ]
    )
    func invalid(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("a leap year's 29 February and a leap second are read")
    func edges() {
        #expect(HTTPDate.parse("Tue, 29 Feb 2028 00:00:00 GMT") != nil)
        #expect(HTTPDate.parse("Sat, 31 Dec 2016 23:59:60 GMT") == HTTPDate.parse("Sat, 31 Dec 2016 23:59:59 GMT"))
    }

    @Test(
        "a two-digit year reads at any present, even one no calendar has (a stored response's damaged time)",
        arguments: [Double.nan, .infinity, -.infinity, 1e300, -1e300, 1e18 * 86_400, 9e15]
    )
    func presentOutOfRange(seconds: TimeInterval) throws {
        let date = try #require(
            HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: Date(timeIntervalSince1970: seconds))
        )
        let utc = try #require(TimeZone(identifier: "UTC"))
        let year = Calendar(identifier: .gregorian).dateComponents(in: utc, from: date).year
        // The present is held to the years 0 to 9999 (1970 for NaN), and 94 is the first year
        // from 1994 on that is less than 50 years behind it.
        #expect(year == (seconds > 0 ? 9994 : 1994))
    }
}
