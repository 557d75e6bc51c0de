import Foundation
import HTTPTypes

/// A response as the cache keeps it, without its body: the response head, when it was
/// requested and received, and the request's values of the fields its `Vary` names.
///
/// It is what ``DiskCache`` holds as an entry's metadata, in the binary form of
/// ``encoded()`` and ``init(decoding:)``.
public struct StoredResponse: Sendable, Hashable {
    /// The status and header fields, without the fields a cache must not store.
    public var response: HTTPResponse {
        didSet { self.facts = FreshnessFacts(self.response, self.requestTime, self.responseTime) }
    }
    /// When the request that brought the response was sent (RFC 9111 §4.2.3's `request_time`).
    public var requestTime: Date {
        didSet { self.facts = FreshnessFacts(self.response, self.requestTime, self.responseTime) }
    }
    /// When the response was received (`response_time`).
    public var responseTime: Date {
        didSet { self.facts = FreshnessFacts(self.response, self.requestTime, self.responseTime) }
    }
    /// What freshness depends on, read from the head once rather than on every use.
    private(set) var facts: FreshnessFacts
    /// For each field name that `Vary` lists (lowercased), the request's value, normalized, or
    /// `nil` if the request had no such field.
    public var varyingFields: [VaryingField]

    /// One request field that selected a stored response.
    public struct VaryingField: Sendable, Hashable {
        /// The field name, lowercased.
        public var name: String
        /// The request's field lines joined with ", " and their whitespace collapsed, or `nil`
        /// if the request had none.
        public var value: String?

        /// Creates a varying field.
        public init(name: String, value: String?) {
            self.name = name
            self.value = value
        }
    }

    /// Stores `response`, received at `responseTime` for `request` sent at `requestTime`.
    ///
    /// The fields that RFC 9111 §3.1 says not to store (`Connection`, the fields it names, and
    /// the other hop-by-hop fields) are dropped.
    public init(request: HTTPRequest, response: HTTPResponse, requestTime: Date, responseTime: Date) {
        var response = response
        response.headerFields = Self.storableFields(of: response.headerFields)
        self.response = response
        self.requestTime = requestTime
        self.responseTime = responseTime
        let facts = FreshnessFacts(response, requestTime, responseTime)
        self.facts = facts
        self.varyingFields = (facts.varyNames ?? []).map { name in
            VaryingField(name: name, value: Self.normalizedValue(of: name, in: request.headerFields))
        }
    }

    init(response: HTTPResponse, requestTime: Date, responseTime: Date, varyingFields: [VaryingField]) {
        self.response = response
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.varyingFields = varyingFields
        self.facts = FreshnessFacts(response, requestTime, responseTime)
    }

    /// Whether `request` selects this response: it has the same values for every field that
    /// `Vary` names (RFC 9111 §4.1). A response with `Vary: *` matches no request.
    public func matches(_ request: HTTPRequest) -> Bool {
        guard self.facts.varyNames != nil else { return false }
        return self.varyingFields.allSatisfy { field in
            Self.normalizedValue(of: field.name, in: request.headerFields) == field.value
        }
    }

    // MARK: - Vary

    /// The lowercased field names that `Vary` lists, or `nil` if it lists `*`.
    static func varyNames(of fields: HTTPFields) -> [String]? {
        var names: [String] = []
        for value in fields[values: .vary] {
            for name in value.split(separator: ",") {
                let name = name.trimmingWhitespace().lowercased()
                if name == "*" { return nil }
                if !name.isEmpty, !names.contains(name) { names.append(name) }
            }
        }
        return names
    }

    /// The request's lines of field `name` joined with ", ", each with runs of whitespace made
    /// one space; `nil` if there are none or `name` is not a field name.
    static func normalizedValue(of name: String, in fields: HTTPFields) -> String? {
        guard let fieldName = HTTPField.Name(name) else { return nil }
        let values = fields[values: fieldName]
        guard !values.isEmpty else { return nil }
        return values.map { $0.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ") }
            .joined(separator: ", ")
    }

    // MARK: - Fields not stored

    /// Fields that concern one connection only (RFC 9110 §7.6.1), which a cache never stores.
    static let hopByHopFields: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authorization", "trailer",
    ]

    /// `fields` without the hop-by-hop fields and those that `Connection` names.
    static func storableFields(of fields: HTTPFields) -> HTTPFields {
        var excluded = Self.hopByHopFields
        for value in fields[values: .connection] {
            for name in value.split(separator: ",") { excluded.insert(name.trimmingWhitespace().lowercased()) }
        }
        return HTTPFields(fields.filter { !excluded.contains($0.name.canonicalName) })
    }
}
