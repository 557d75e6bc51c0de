import Foundation
import HTTPTypes

@testable import Cachalot

/// Messages for the tests of the HTTP rules, written as compactly as the RFC's examples.
enum Messages {
    /// A moment to count from: 2027-01-15 08:00:00 UTC.
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    static func fields(_ pairs: [(String, String)]) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        return fields
    }

    static func request(
        _ url: String = "https://example.com/a?b=1",
        method: HTTPRequest.Method = .get,
        _ pairs: [(String, String)] = []
    ) -> HTTPRequest {
        HTTPRequest(method: method, url: URL(string: url)!, headerFields: Self.fields(pairs))
    }

    static func request(_ pairs: [(String, String)]) -> HTTPRequest {
        Self.request("https://example.com/a?b=1", pairs)
    }

    static func response(_ status: Int = 200, _ pairs: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: .init(code: status), headerFields: Self.fields(pairs))
    }

    /// A response stored when it arrived at `start`, after a request sent `delay` seconds before.
    static func stored(
        _ status: Int = 200,
        _ pairs: [(String, String)] = [],
        request: HTTPRequest = Messages.request(),
        delay: TimeInterval = 0
    ) -> StoredResponse {
        StoredResponse(
            request: request,
            response: Self.response(status, pairs),
            requestTime: Self.start.addingTimeInterval(-delay),
            responseTime: Self.start
        )
    }

    /// `start` plus `seconds`.
    static func at(_ seconds: TimeInterval) -> Date {
        Self.start.addingTimeInterval(seconds)
    }

    /// The HTTP date of `start` plus `seconds`.
    static func date(_ seconds: TimeInterval) -> String {
        HTTPDate.format(Self.at(seconds))
    }
}
