import CachalotAsyncHTTPClient
import CachalotTestOrigin
import CachalotTesting
import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

/// Origins that redirect, answer 304 out of turn, frame bodies oddly or break HTTP outright.
/// Each test checks the answer or the error, and what an offline load finds stored afterwards:
/// the cache never answers with bytes the origin did not send for that URL.
@Suite("ResourceLoader against a hostile origin", .timeLimit(.minutes(1)))
struct HostileOriginTests {
    let clock = ManualWallClock()
    let directory: TemporaryDirectory

    init() throws {
        self.directory = try TemporaryDirectory()
    }

    func makeLoader(_ configuration: ResourceLoader.Configuration = .init()) throws -> ResourceLoader {
        let clock = self.clock
        return try ResourceLoader(
            configuration: configuration,
            transport: AsyncHTTPClientTransport(),
            disk: DiskCache(directory: self.directory.url, now: { clock.now }),
            now: { clock.now }
        )
    }

    /// What a new loader on the same directory answers offline: only what is stored.
    func offline(_ url: URL, maximumRedirects: Int = 20) async throws -> Resource {
        let loader = try self.makeLoader(.init(policy: .returnCacheDataDontLoad, maximumRedirects: maximumRedirects))
        return try await loader.load(url)
    }

    // MARK: - Redirects

    @Test("a no-store redirect is followed and not stored: its target is never served under the first URL")
    func noStoreRedirect() async throws {
        let origin = try await TestOrigin.start { request in
            switch request.path {
            case "/account": .init(status: 302, fields: [("Location", "/login"), ("Cache-Control", "no-store")])
            default: .init(fields: [("Cache-Control", "max-age=600")], body: "login page")
            }
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let first = try await loader.load(origin.url("/account"))
        #expect(first.body == Data("login page".utf8))
        #expect(first.redirects == [origin.url("/login")])
        origin.respond { _ in .init(fields: [("Cache-Control", "max-age=600")], body: "your account") }
        let second = try await loader.load(origin.url("/account"))
        #expect(second.body == Data("your account".utf8))
        #expect(second.source == .network)
        #expect(second.redirects.isEmpty)
        await loader.waitForBackgroundWork()
        // Each URL holds what the origin sent for it.
        #expect(try await self.offline(origin.url("/login")).body == Data("login page".utf8))
        #expect(try await self.offline(origin.url("/account")).body == Data("your account".utf8))
    }

    @Test("each hop of a cacheable redirect is stored under its own URL, and answered from the cache")
    func cachedRedirect() async throws {
        let origin = try await TestOrigin.start { request in
            switch request.path {
            case "/old": .init(status: 301, fields: [("Location", "/new"), ("Cache-Control", "max-age=600")])
            default: .init(fields: [("Cache-Control", "max-age=600")], body: "new")
            }
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        #expect(try await loader.load(origin.url("/old")).body == Data("new".utf8))
        let again = try await loader.load(origin.url("/old"))
        #expect(again.body == Data("new".utf8))
        #expect(again.source == .memory)
        #expect(again.redirects == [origin.url("/new")])
        #expect(origin.requests.map(\.path) == ["/old", "/new"])
        await loader.waitForBackgroundWork()
        let stored = try await self.offline(origin.url("/old"), maximumRedirects: 0)
        #expect(stored.response.status.code == 301)
        #expect(stored.body.isEmpty)
        let followed = try await self.offline(origin.url("/old"))
        #expect(followed.body == Data("new".utf8))
        #expect(followed.redirects == [origin.url("/new")])
    }

    @Test(
        "a redirect the loader will not follow is the answer, never an empty 200",
        arguments: [
            "ftp://127.0.0.1/file", "http://127.0.0.1:99999/x", "http://127.0.0.1:0/x", "http://", "", "http://[::1",
            "data:text/plain,hi", "file:///etc/passwd", "javascript:alert(1)", "http://127.0.0.1:-1/x",
        ]
    )
    func unfollowedRedirect(location: String) async throws {
        let origin = try await TestOrigin.start { _ in .init(status: 302, fields: [("Location", location)]) }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let answer = try await loader.load(origin.url("/r"))
        #expect(answer.response.status.code == 302)
        #expect(answer.redirects.isEmpty)
        #expect(origin.requests.count == 1)
        await loader.waitForBackgroundWork()
    }

    @Test("a redirect loop ends after the most redirects a load follows, with the last redirect as the answer")
    func redirectLoop() async throws {
        let origin = try await TestOrigin.start { request in
            .init(status: 302, fields: [("Location", request.path == "/a" ? "/b" : "/a")])
        }
        defer { origin.stop() }
        let loader = try self.makeLoader(.init(maximumRedirects: 5))
        let answer = try await loader.load(origin.url("/a"))
        #expect(answer.response.status.code == 302)
        #expect(answer.redirects.count == 5)
        #expect(origin.requests.count == 6)
        await loader.waitForBackgroundWork()
    }

    @Test("a 307 repeats a POST with its body at the target; a 303 turns it into a GET without one")
    func methodsAcrossRedirects() async throws {
        let origin = try await TestOrigin.start { request in
            switch request.path {
            case "/keep": .init(status: 307, fields: [("Location", "/target")])
            case "/see": .init(status: 303, fields: [("Location", "/target")])
            default: .init(body: request.method.rawValue)
            }
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let post = HTTPRequest(method: .post, url: origin.url("/keep"))
        #expect(try await loader.load(post, body: Data("x".utf8)).body == Data("POST".utf8))
        let see = HTTPRequest(method: .post, url: origin.url("/see"))
        #expect(try await loader.load(see, body: Data("x".utf8)).body == Data("GET".utf8))
        await loader.waitForBackgroundWork()
    }

    // MARK: - 304

    @Test("a 304 to a request without validators is an origin error and stores nothing")
    func unsolicitedNotModified() async throws {
        let origin = try await TestOrigin.start { _ in .init(status: 304, fields: [("Cache-Control", "max-age=3600")]) }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        await #expect {
            _ = try await loader.load(origin.url("/x"))
        } throws: { error in
            (error as? LoadError)?.code == .invalidResponse
        }
        await loader.waitForBackgroundWork()
        #expect(try await self.offline(origin.url("/x")).response.status.code == 504)
    }

    @Test("a 304 to the retry without validators leaves the stored 200 as it was")
    func notModifiedToUnconditionalRetry() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")], body: "good")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        _ = try await loader.load(origin.url("/x"))
        // The 304 names another representation, so the loader asks again without validators,
        // and is answered 304 once more.
        origin.respond { _ in .init(status: 304, fields: [("ETag", "\"v2\""), ("Cache-Control", "max-age=3600")]) }
        self.clock.advance(by: 61)
        await #expect(throws: LoadError.self) { _ = try await loader.load(origin.url("/x")) }
        await loader.waitForBackgroundWork()
        let stored = try await self.offline(origin.url("/x"))
        #expect(stored.response.status.code == 200)
        #expect(stored.body == Data("good".utf8))
    }

    @Test("a 304 to the caller's own conditional request is passed on, not stored")
    func callersConditionalRequest() async throws {
        let origin = try await TestOrigin.start { _ in .init(status: 304, fields: [("ETag", "\"v1\"")]) }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        var request = HTTPRequest(method: .get, url: origin.url("/x"))
        request.headerFields[.ifNoneMatch] = "\"v1\""
        #expect(try await loader.load(request).response.status.code == 304)
        await loader.waitForBackgroundWork()
        #expect(try await self.offline(origin.url("/x")).response.status.code == 504)
    }

    // MARK: - Bodies that are not there

    @Test("a 304 that carries the Content-Length of the stored body revalidates it")
    func notModifiedWithContentLength() async throws {
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")], body: "body")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        _ = try await loader.load(origin.url("/x"))
        origin.respond { _ in .init(status: 304, fields: [("ETag", "\"v1\""), ("Content-Length", "4")]) }
        self.clock.advance(by: 61)
        let revalidated = try await loader.load(origin.url("/x"))
        #expect(revalidated.source == .revalidated)
        #expect(revalidated.body == Data("body".utf8))
        await loader.waitForBackgroundWork()
    }

    @Test("the answer to HEAD, and a 204, have no body whatever their Content-Length says")
    func noBodyWithContentLength() async throws {
        let origin = try await TestOrigin.start { request in
            request.method == .head
                ? .init(fields: [("Content-Length", "10")]) : .init(status: 204, fields: [("Content-Length", "7")])
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let head = try await loader.load(HTTPRequest(method: .head, url: origin.url("/h")))
        #expect(head.response.status.code == 200)
        #expect(head.body.isEmpty)
        let empty = try await loader.load(origin.url("/e"))
        #expect(empty.response.status.code == 204)
        #expect(empty.body.isEmpty)
        await loader.waitForBackgroundWork()
    }

    // MARK: - Bodies as sent

    @Test("a compressed body is stored and answered exactly as the origin sent it, and none is asked for")
    func compressedBodyAsSent() async throws {
        // "hello" gzipped by Python's gzip module, with its header's time zeroed.
        let gzipped = Data(
            [
                0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00,
                0x86, 0xa6, 0x10, 0x36, 0x05, 0x00, 0x00, 0x00,
            ]
        )
        let origin = try await TestOrigin.start { _ in
            .init(fields: [("Content-Encoding", "gzip"), ("Cache-Control", "max-age=60")], data: gzipped)
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        let answer = try await loader.load(origin.url("/z"))
        #expect(answer.body == gzipped)
        #expect(answer.response.headerFields[.contentEncoding] == "gzip")
        #expect(origin.requests.first?.headerFields[.acceptEncoding] == nil)
        await loader.waitForBackgroundWork()
        #expect(try await self.offline(origin.url("/z")).body == gzipped)
    }

    // MARK: - Broken HTTP

    @Test(
        "a status outside 200–599 is an origin error, stored nowhere",
        arguments: ["600", "999", "101"]
    )
    func invalidStatus(status: String) async throws {
        let origin = try await RawOrigin.start { _ in
            .init("HTTP/1.1 \(status) Odd\r\nCache-Control: max-age=60\r\nContent-Length: 2\r\n\r\nhi")
        }
        defer { origin.stop() }
        let loader = try self.makeLoader()
        await #expect(throws: LoadError.self) { _ = try await loader.load(origin.url("/s")) }
        await loader.waitForBackgroundWork()
        #expect(try await self.offline(origin.url("/s")).response.status.code == 504)
    }

    /// Answers that break HTTP's framing or syntax, each storable if it were read leniently,
    /// with the bodies a lenient reading could mean. Whatever the client makes of them, the cache
    /// answers an error or exactly one of those bodies, and stores nothing else.
    static let brokenAnswers: [(name: String, head: String, body: String, meanings: [String])] = [
        ("status not a number", "HTTP/1.1 2OO OK\r\nContent-Length: 2", "hi", ["hi"]),
        ("no status line", "Content-Length: 2", "hi", ["hi"]),
        ("field without a colon", "HTTP/1.1 200 OK\r\nX-Odd\r\nContent-Length: 2", "hi", ["hi"]),
        ("space before the colon", "HTTP/1.1 200 OK\r\nContent-Length : 2", "hi", ["hi"]),
        ("two Content-Lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5", "hello", ["he", "hello"]),
        ("negative Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: -2", "hi", ["hi"]),
        ("huge Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999", "hi", []),
        ("body longer than Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 2", "hi and more", ["hi"]),
        ("chunk size not hex", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", "ZZ\r\nhello\r\n0\r\n\r\n", []),
        ("chunk longer than said", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", "2\r\nhello\r\n0\r\n\r\n", ["he"]),
        ("chunked without its last chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", "5\r\nhello\r\n", []),
        (
            "chunked and Content-Length", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3",
            "5\r\nhello\r\n0\r\n\r\n", ["hello"]
        ),
        ("unknown transfer coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: rot13", "uryyb", ["uryyb"]),
        (
            "a field of a megabyte",
            "HTTP/1.1 200 OK\r\nX-Big: \(String(repeating: "a", count: 1 << 20))\r\nContent-Length: 2",
            "hi", ["hi"]
        ),
        (
            "ten thousand fields",
            "HTTP/1.1 200 OK\r\n" + String(repeating: "X-Many: 1\r\n", count: 10_000) + "Content-Length: 2",
            "hi", ["hi"]
        ),
        ("NUL in a field", "HTTP/1.1 200 OK\r\nX-Odd: a\u{0}b\r\nContent-Length: 2", "hi", ["hi"]),
        (
            "interim 103 before the answer",
            "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2",
            "hi", ["hi"]
        ),
        ("only an interim answer", "HTTP/1.1 100 Continue", "", []),
        ("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM", "", []),
    ]

    @Test(
        "an answer that breaks HTTP is an error or exactly what it means, and nothing else is ever stored",
        arguments: brokenAnswers.map(\.name)
    )
    func brokenHTTP(name: String) async throws {
        let answer = try #require(Self.brokenAnswers.first { $0.name == name })
        let raw = answer.head + "\r\nCache-Control: max-age=600\r\nConnection: close\r\n\r\n" + answer.body
        let origin = try await RawOrigin.start { _ in .init(raw) }
        defer { origin.stop() }
        let meanings = Set(answer.meanings.map { Data($0.utf8) })
        let loader = try self.makeLoader()
        if let loaded = try? await loader.load(origin.url("/x")) {
            #expect(meanings.contains(loaded.body), "\(name): answered \(loaded.body.count) bytes")
        }
        await loader.waitForBackgroundWork()
        let stored = try await self.offline(origin.url("/x"))
        #expect(
            stored.response.status.code == 504 || meanings.contains(stored.body),
            "\(name): stored \(stored.response.status.code), \(stored.body.count) bytes"
        )
    }

    @Test("a request to a port outside 1–65535 is a clear error, not a trap")
    func invalidPort() async throws {
        let loader = try self.makeLoader()
        await #expect {
            _ = try await loader.load(URL(string: "http://127.0.0.1:99999/x")!)
        } throws: { error in
            (error as? LoadError)?.code == .invalidRequest
        }
    }
}
