import Foundation
import Testing

@testable import Cachalot

@Suite("CacheControl")
struct CacheControlTests {
    @Test("directives are read in any case, with token or quoted arguments, over several lines")
    func parsing() {
        let directives = CacheControl([
            "Max-Age=60, PUBLIC, no-cache=\"Set-Cookie, X-Foo\"", "stale-while-revalidate=\"30\"", "immutable",
        ])
        #expect(directives.maxAge == 60)
        #expect(directives.isPublic)
        #expect(directives.isNoCache)
        #expect(directives.noCacheFields == ["set-cookie", "x-foo"])
        #expect(directives.staleWhileRevalidate == 30)
        #expect(directives.isImmutable)
        #expect(!directives.hasInvalidFreshness)
    }

    @Test("request directives: max-stale with and without a value, min-fresh, only-if-cached")
    func requestDirectives() {
        #expect(CacheControl("max-stale").maxStale == Int.max)
        #expect(CacheControl("max-stale=5").maxStale == 5)
        #expect(CacheControl("min-fresh=10, min-fresh=20").minFresh == 20)
        #expect(CacheControl("only-if-cached").isOnlyIfCached)
        #expect(CacheControl("no-store").isNoStore)
    }

    @Test(
        "a malformed or conflicting max-age makes the response stale",
        arguments: [
            "max-age=abc", "max-age=-1", "max-age=", "max-age", "max-age=5 junk", "max-age=10, max-age=20",
            "max-age=\"60",
        ]
    )
    func invalidMaxAge(value: String) {
        let directives = CacheControl(value)
        #expect(directives.maxAge == 0)
        #expect(directives.hasInvalidFreshness)
    }

    @Test("the same max-age twice is not a conflict")
    func repeatedMaxAge() {
        let directives = CacheControl(["max-age=10", "max-age=10"])
        #expect(directives.maxAge == 10)
        #expect(!directives.hasInvalidFreshness)
    }

    @Test("a number too large to hold counts as 2^31 seconds")
    func overflow() {
        #expect(CacheControl("max-age=99999999999999999999999999").maxAge == 1 << 31)
    }

    @Test("stale windows take the smallest valid value; malformed ones are ignored")
    func staleWindows() {
        let directives = CacheControl("stale-if-error=60, stale-if-error=30, stale-while-revalidate=x")
        #expect(directives.staleIfError == 30)
        #expect(directives.staleWhileRevalidate == nil)
    }

    @Test(
        "garbage does not crash and unknown directives are ignored",
        arguments: [",,,", "=", "=5", "\"", "max-age=\"unterminated", "foo=bar, baz", "  ,  public  ,  "]
    )
    func garbage(value: String) {
        let directives = CacheControl(value)
        #expect(!directives.isNoStore)
    }

    @Test("a comma inside quotes does not split directives")
    func quotedComma() {
        let directives = CacheControl("private=\"a, no-store\", max-age=5")
        #expect(directives.isPrivate)
        #expect(!directives.isNoStore)
        #expect(directives.maxAge == 5)
    }

    @Test("optional whitespace is trimmed as bytes: spaces and tabs at both ends, nothing inside, other bytes kept")
    func trimmingWhitespace() {
        #expect(" \tmax-age=5 \t ".trimmingWhitespace() == "max-age=5")
        #expect("a b\tc".trimmingWhitespace() == "a b\tc")
        #expect(" \t  ".trimmingWhitespace() == "")
        #expect("".trimmingWhitespace() == "")
        #expect("\tcafé ".trimmingWhitespace() == "café")
        #expect(" x, y "[...].split(separator: ",").map { $0.trimmingWhitespace() } == ["x", "y"])
        // A space is trimmed even before a combining mark, which a reading by characters
        // would take as one with it: a field value is bytes (RFC 9110 §5.5).
        #expect(" \u{301}a".trimmingWhitespace() == "\u{301}a")
    }
}
