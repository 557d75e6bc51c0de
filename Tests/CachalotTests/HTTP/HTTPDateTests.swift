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

    @Test(
        "only the grammar of each form is a date (RFC 9110 §5.6.7)",
        arguments: [
            // A two-digit year outside RFC 850, a four-digit one in it.
            "Sun, 06 Nov 94 08:49:37 GMT", "Sun Nov  6 08:49:37 94", "Sunday, 06-Nov-1994 08:49:37 GMT",
            // A comma missing, or where asctime has none.
            "Sun 06 Nov 1994 08:49:37 GMT", "Sunday 06-Nov-94 08:49:37 GMT", "Sun, Nov  6 08:49:37 1994",
            // Spaces extra, missing, or tabs.
            "Sun,  06 Nov 1994 08:49:37 GMT", "Sun,06 Nov 1994 08:49:37 GMT", "Sun, 06  Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994  08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37  GMT", "Sun, 06 Nov 1994 08:49:37GMT",
            "Sun,\t06 Nov 1994 08:49:37 GMT", "Sun Nov 6 08:49:37 1994", "Sun  Nov  6 08:49:37 1994",
            "Sunday,  06-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-94  08:49:37 GMT",
            // Dashes outside RFC 850, spaces in it.
            "Sun, 06-Nov-1994 08:49:37 GMT", "Sun, 06-Nov-94 08:49:37 GMT", "Sunday, 06 Nov 94 08:49:37 GMT",
            // The day name of another form.
            "Sunday, 06 Nov 1994 08:49:37 GMT", "Sunday Nov  6 08:49:37 1994", "Sun, 06-Nov-94 08:49:37 GMT",
            "Sund, 06 Nov 1994 08:49:37 GMT", "Sundays, 06-Nov-94 08:49:37 GMT",
            // A one-digit day or time field, a zone other than GMT, and a date in asctime with a zone.
            "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37 +0000", "Sun Nov  6 08:49:37 1994 GMT", "Sunday, 06-Nov-94 08:49:37 UTC",
            // Out of range, or signs and other characters where digits go.
            "Sun, 32 Dec 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:61 GMT", "Sun Nov 31 08:49:37 1994",
            "Sun Nov  0 08:49:37 1994", "Sun, +6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08.49.37 GMT",
            "Sun, 06 Nov 1994 08:49:3a GMT", "Sunday, 06-Nov-9x 08:49:37 GMT",
        ]
    )
    func notTheGrammar(text: String) {
        #expect(HTTPDate.parse(text, now: Messages.start) == nil)
    }

    @Test(
        "names and GMT in any case (RFC 9111 §4.2), asctime's day in two digits, spaces around the value",
        arguments: [
            "sun, 06 nov 1994 08:49:37 gmt", "SUNDAY, 06-NOV-94 08:49:37 GMT", "Sun Nov 06 08:49:37 1994",
            " Sun, 06 Nov 1994 08:49:37 GMT\t", "Sun, 06 Nov 1994 08:49:37 GMT ",
        ]
    )
    func tolerated(text: String) {
        #expect(HTTPDate.parse(text, now: Messages.start) == Self.example)
    }

    @Test("each long day name is read in RFC 850, each short one in the other forms")
    func dayNames() {
        let long = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
        for name in long {
            #expect(HTTPDate.parse("\(name), 06-Nov-94 08:49:37 GMT", now: Messages.start) == Self.example)
            #expect(HTTPDate.parse("\(name.prefix(3)), 06 Nov 1994 08:49:37 GMT") == Self.example)
            #expect(HTTPDate.parse("\(name.prefix(3)) Nov  6 08:49:37 1994") == Self.example)
        }
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
