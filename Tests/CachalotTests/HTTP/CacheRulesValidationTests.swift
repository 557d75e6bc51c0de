import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("CacheRules: validation and invalidation (RFC 9111 §4.3, §4.4)")
struct CacheRulesValidationTests {
    let rules = CacheRules.privateCache

    @Test("a conditional request carries the stored ETag and Last-Modified")
    func conditional() {
        let stored = Messages.stored(200, [("ETag", "W/\"v1\""), ("Last-Modified", Messages.date(-100))])
        let request = self.rules.conditionalRequest(for: Messages.request(), stored: stored)
        #expect(request.headerFields[.ifNoneMatch] == "W/\"v1\"")
        #expect(request.headerFields[.ifModifiedSince] == Messages.date(-100))
        let bare = self.rules.conditionalRequest(
            for: Messages.request(),
            stored: Messages.stored(200, [("Last-Modified", "garbage")])
        )
        #expect(bare.headerFields[.ifNoneMatch] == nil && bare.headerFields[.ifModifiedSince] == nil)
    }

    @Test("a 304 replaces the stored fields it carries, keeps the others, and restarts the age")
    func freshening() throws {
        let stored = Messages.stored(
            200,
            [
                ("ETag", "\"v1\""), ("Cache-Control", "max-age=60"), ("Content-Type", "image/png"),
                ("Content-Length", "5"),
            ]
        )
        let notModified = Messages.response(
            304,
            [("ETag", "\"v1\""), ("Cache-Control", "max-age=120"), ("Content-Length", "0"), ("X-New", "1")]
        )
        let freshened = try #require(
            self.rules.freshened(
                stored,
                with: notModified,
                requestTime: Messages.at(99),
                responseTime: Messages.at(100)
            )
        )
        let fields = freshened.response.headerFields
        #expect(fields[.cacheControl] == "max-age=120")
        #expect(fields[.contentType] == "image/png")
        #expect(fields[.contentLength] == "5")
        #expect(fields[HTTPField.Name("X-New")!] == "1")
        #expect(freshened.response.status.code == 200)
        #expect(freshened.age(at: Messages.at(100)) == 1)
        #expect(
            self.rules.decision(for: Messages.request(), stored: freshened, at: Messages.at(200)) == .useStored(.fresh)
        )
    }

    @Test("a 304 about another representation selects nothing")
    func mismatchedValidator() {
        let stored = Messages.stored(200, [("ETag", "\"v1\""), ("Last-Modified", Messages.date(-10))])
        let otherTag = Messages.response(304, [("ETag", "\"v2\"")])
        #expect(
            self.rules.freshened(stored, with: otherTag, requestTime: Messages.start, responseTime: Messages.start)
                == nil
        )
        let weakSame = Messages.response(304, [("ETag", "W/\"v1\"")])
        #expect(
            self.rules.freshened(stored, with: weakSame, requestTime: Messages.start, responseTime: Messages.start)
                != nil
        )
        let otherDate = Messages.response(304, [("Last-Modified", Messages.date(-5))])
        #expect(
            self.rules.freshened(stored, with: otherDate, requestTime: Messages.start, responseTime: Messages.start)
                == nil
        )
    }

    @Test("an unsafe method's success invalidates its URL, and Location and Content-Location on the same origin")
    func invalidation() {
        let request = Messages.request("https://example.com/items/1?x=1", method: .put)
        let response = Messages.response(
            201,
            [("Location", "/items/2"), ("Content-Location", "https://other.example/items/3")]
        )
        #expect(
            self.rules.invalidatedURLs(by: request, response: response) == [
                "https://example.com/items/1?x=1", "https://example.com/items/2",
            ]
        )
        #expect(self.rules.invalidatedURLs(by: request, response: Messages.response(500)).isEmpty)
        #expect(
            self.rules.invalidatedURLs(by: Messages.request(method: .get), response: Messages.response(200)).isEmpty
        )
        #expect(
            self.rules.invalidatedURLs(by: Messages.request(method: .delete), response: Messages.response(204))
                == ["https://example.com/a?b=1"]
        )
    }
}
