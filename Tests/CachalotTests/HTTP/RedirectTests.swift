import Foundation
import HTTPTypes
import Testing

@testable import Cachalot

@Suite("Redirect")
struct RedirectTests {
    func response(_ status: Int, location: String?) -> HTTPResponse {
        var response = HTTPResponse(status: .init(code: status))
        if let location { response.headerFields[.location] = location }
        return response
    }

    func request(_ method: HTTPRequest.Method = .get, _ url: String = "https://a.example/dir/page") -> HTTPRequest {
        var request = HTTPRequest(method: method, url: URL(string: url)!)
        request.headerFields[.authorization] = "Bearer secret"
        request.headerFields[.cookie] = "session=1"
        request.headerFields[.contentType] = "text/plain"
        return request
    }

    @Test("Location is resolved against the request's URL; same-origin hops keep the credentials")
    func relativeLocation() throws {
        let next = try #require(
            Redirect.request(following: self.response(302, location: "../other?q=1"), to: self.request(), body: nil)
        )
        #expect(next.request.url?.absoluteString == "https://a.example/other?q=1")
        #expect(next.request.headerFields[.authorization] == "Bearer secret")
        #expect(next.request.headerFields[.cookie] == "session=1")
    }

    @Test(
        "a hop to another origin loses Authorization and Cookie",
        arguments: [
            "https://b.example/x", "http://a.example/dir/page", "https://a.example:8443/x",
        ]
    )
    func crossOrigin(location: String) throws {
        let next = try #require(
            Redirect.request(following: self.response(301, location: location), to: self.request(), body: nil)
        )
        #expect(next.request.headerFields[.authorization] == nil)
        #expect(next.request.headerFields[.cookie] == nil)
    }

    @Test("303 turns a POST into a GET without its body and body fields; 307 and 308 keep both")
    func methods() throws {
        let body = Data("form".utf8)
        let seeOther = try #require(
            Redirect.request(following: self.response(303, location: "/x"), to: self.request(.post), body: body)
        )
        #expect(seeOther.request.method == .get)
        #expect(seeOther.body == nil)
        #expect(seeOther.request.headerFields[.contentType] == nil)
        for status in [307, 308] {
            let kept = try #require(
                Redirect.request(following: self.response(status, location: "/x"), to: self.request(.post), body: body)
            )
            #expect(kept.request.method == .post)
            #expect(kept.body == body)
        }
        let head = try #require(
            Redirect.request(following: self.response(303, location: "/x"), to: self.request(.head), body: nil)
        )
        #expect(head.request.method == .head)
    }

    @Test(
        "statuses that are not redirects, and targets that cannot be followed, are not followed",
        arguments: [
            (300, "/x"), (304, "/x"), (305, "/x"), (302, nil), (302, "ftp://a.example/x"), (302, "mailto:a@b.example"),
            (302, "http://a.example:99999/x"), (302, "http:///nohost"), (302, " "),
        ] as [(Int, String?)]
    )
    func notFollowed(status: Int, location: String?) {
        #expect(
            Redirect.request(following: self.response(status, location: location), to: self.request(), body: nil) == nil
        )
    }

    @Test("two Location fields are not followed")
    func twoLocations() {
        var response = self.response(302, location: "/a")
        response.headerFields.append(HTTPField(name: .location, value: "/b"))
        #expect(Redirect.request(following: response, to: self.request(), body: nil) == nil)
    }
}
