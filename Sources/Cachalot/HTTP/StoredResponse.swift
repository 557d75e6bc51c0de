import Foundation
import HTTPTypes
import Synchronization

/// A response as the cache keeps it, without its body: the response head, when it was
/// requested and received, and the request's values of the fields its `Vary` names.
///
/// It is what ``DiskCache`` holds as an entry's metadata, in the binary form of
/// ``encoded()`` and ``init(decoding:)``.
public struct StoredResponse: Sendable, Hashable {
    /// Every part in one immutable object: copying a stored response, as each use of the
    /// cache does, costs one retain rather than one per part. A setter makes a new one.
    private var storage: Storage

    private final class Storage: Sendable {
        let requestTime: Date
        let responseTime: Date
        let varyingFields: [VaryingField]
        let facts: FreshnessFacts
        /// Roughly the memory the head takes once decoded.
        let headCost: Int
        /// The head's status code, known without decoding the head.
        let statusCode: Int
        private let head: Mutex<Head>
        /// A value a user of the cache derived from the head, kept with it (see
        /// ``StoredResponse/derived(_:)``).
        let derived = Mutex<(any Sendable)?>(nil)

        /// The head, or, for a response read from metadata, its bytes until it is first read:
        /// a fresh hit whose caller wants only the body decodes no field.
        enum Head: Sendable {
            case decoded(HTTPResponse)
            case encoded(EncodedHead)
        }

        init(
            _ response: HTTPResponse,
            _ requestTime: Date,
            _ responseTime: Date,
            _ varyingFields: [VaryingField],
            facts: FreshnessFacts
        ) {
            self.requestTime = requestTime
            self.responseTime = responseTime
            self.varyingFields = varyingFields
            self.facts = facts
            self.headCost = response.headerFields.reduce(256) {
                $0 + $1.name.rawName.utf8.count + $1.value.utf8.count + 32
            }
            self.statusCode = response.status.code
            self.head = Mutex(.decoded(response))
        }

        init(
            _ head: EncodedHead,
            _ requestTime: Date,
            _ responseTime: Date,
            _ varyingFields: [VaryingField],
            facts: FreshnessFacts
        ) {
            self.requestTime = requestTime
            self.responseTime = responseTime
            self.varyingFields = varyingFields
            self.facts = facts
            self.headCost = head.cost
            self.statusCode = head.statusCode
            self.head = Mutex(.encoded(head))
        }

        var response: HTTPResponse {
            self.head.withLock { head in
                switch head {
                case .decoded(let response):
                    return response
                case .encoded(let encoded):
                    let response = encoded.decode()
                    head = .decoded(response)
                    return response
                }
            }
        }
    }

    /// The status and header fields, without the fields a cache must not store.
    public var response: HTTPResponse {
        get { self.storage.response }
        set {
            self.storage = Self.storage(newValue, self.requestTime, self.responseTime, self.varyingFields, self.targets)
        }
    }
    /// When the request that brought the response was sent (RFC 9111 §4.2.3's `request_time`).
    public var requestTime: Date {
        get { self.storage.requestTime }
        set {
            self.storage = Self.storage(self.response, newValue, self.responseTime, self.varyingFields, self.targets)
        }
    }
    /// When the response was received (`response_time`).
    public var responseTime: Date {
        get { self.storage.responseTime }
        set { self.storage = Self.storage(self.response, self.requestTime, newValue, self.varyingFields, self.targets) }
    }
    /// For each field name that `Vary` lists (lowercased), the request's value, normalized (see
    /// ``VaryingField/value``), or `nil` if the request had no such field.
    public var varyingFields: [VaryingField] {
        get { self.storage.varyingFields }
        set { self.storage = Self.storage(self.response, self.requestTime, self.responseTime, newValue, self.targets) }
    }
    /// What freshness depends on, read from the head once rather than on every use.
    var facts: FreshnessFacts { self.storage.facts }
    /// The targeted cache-control fields the facts were computed with.
    private var targets: [HTTPField.Name] { self.storage.facts.targets }

    /// The value a user of the cache derived from the head and kept with this stored response
    /// (and its copies), if any (see ``Resource/derivedFromHead(_:)``): the head never changes,
    /// and a setter makes a new one, without the value.
    var derivedValue: (any Sendable)? {
        self.storage.derived.withLock { $0 }
    }

    /// Keeps `value` as ``derivedValue``, in place of any kept before.
    func keepDerivedValue(_ value: any Sendable) {
        self.storage.derived.withLock { $0 = value }
    }

    /// The head a value is derived from: the response without `Age`.
    var headWithoutAge: HTTPResponse {
        var response = self.response
        response.headerFields[.age] = nil
        return response
    }

    /// The status code, known without decoding the head.
    var statusCode: Int { self.storage.statusCode }
    /// Roughly the memory the head takes: 256 bytes, and each field's name and value with 32
    /// bytes more. Known without decoding the head.
    var headCost: Int { self.storage.headCost }

    /// Storage whose facts are computed from the other parts.
    private static func storage(
        _ response: HTTPResponse,
        _ requestTime: Date,
        _ responseTime: Date,
        _ varyingFields: [VaryingField],
        _ targets: [HTTPField.Name]
    ) -> Storage {
        let facts = FreshnessFacts(response, requestTime, responseTime, targets: targets)
        return Storage(response, requestTime, responseTime, varyingFields, facts: facts)
    }

    /// One request field that selected a stored response.
    public struct VaryingField: Sendable, Hashable {
        /// The field name, lowercased.
        public var name: String
        /// The request's field lines read as one list, normalized, or `nil` if the request had
        /// none (RFC 9110 §12.5.5, RFC 9111 §4.1).
        ///
        /// The members are joined with ", ", without the whitespace around them, and each run
        /// of whitespace outside quoted strings made one space. `Accept-Encoding`,
        /// `Accept-Language` and `Accept-Charset`, lists of case-insensitive members whose order
        /// does not matter, are also lowercased, stripped of whitespace, without empty members,
        /// and sorted: `BR,gzip` and `gzip, br` are one value. Other fields keep their case and
        /// order.
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
    ///
    /// - Parameters:
    ///   - request: The request the response answers, whose values of the fields that `Vary`
    ///     names are kept.
    ///   - response: The response.
    ///   - requestTime: When the request was sent.
    ///   - responseTime: When the response was received.
    ///   - targetedFields: The targeted cache-control fields whose directives replace
    ///     `Cache-Control` and `Expires` when the response has one (RFC 9213): pass the rules'
    ///     ``CacheRules/targetedFields``. They are kept with the response, so that a 304 that
    ///     freshens it is read the same way. Default: none.
    public init(
        request: HTTPRequest,
        response: HTTPResponse,
        requestTime: Date,
        responseTime: Date,
        targetedFields: [HTTPField.Name] = []
    ) {
        var response = response
        response.headerFields = Self.storableFields(of: response.headerFields)
        // The facts read `Vary` once, for both.
        let facts = FreshnessFacts(response, requestTime, responseTime, targets: targetedFields)
        let varyingFields = (facts.varyNames ?? []).map { name in
            VaryingField(name: name, value: Self.normalizedValue(of: name, in: request.headerFields))
        }
        self.storage = Storage(response, requestTime, responseTime, varyingFields, facts: facts)
    }

    /// A response whose facts are computed from its parts, with the targeted fields `targets`.
    init(
        response: HTTPResponse,
        requestTime: Date,
        responseTime: Date,
        varyingFields: [VaryingField],
        targets: [HTTPField.Name] = []
    ) {
        self.storage = Self.storage(response, requestTime, responseTime, varyingFields, targets)
    }

    /// A response read from metadata whose head is decoded when it is first read.
    init(head: EncodedHead, requestTime: Date, responseTime: Date, varyingFields: [VaryingField], facts: FreshnessFacts)
    {
        self.storage = Storage(head, requestTime, responseTime, varyingFields, facts: facts)
    }

    /// Whether two stored responses have the same head, request and response times, varying
    /// fields and targeted fields.
    public static func == (left: StoredResponse, right: StoredResponse) -> Bool {
        left.storage === right.storage
            || (left.response == right.response && left.requestTime == right.requestTime
                && left.responseTime == right.responseTime && left.varyingFields == right.varyingFields
                && left.targets == right.targets)
    }

    /// Hashes what ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.response)
        hasher.combine(self.requestTime)
        hasher.combine(self.responseTime)
        hasher.combine(self.varyingFields)
        hasher.combine(self.targets)
    }

    /// Whether `request` selects this response: it has the same values, normalized (see
    /// ``VaryingField/value``), for every field that `Vary` names (RFC 9111 §4.1). A response
    /// with `Vary: *` matches no request.
    public func matches(_ request: HTTPRequest) -> Bool {
        let storage = self.storage
        // Most responses do not vary: no field to read.
        if storage.varyingFields.isEmpty { return storage.facts.varyNames != nil }
        return storage.varyingFields.allSatisfy { field in
            Self.normalizedValue(of: field.name, in: request.headerFields) == field.value
        }
    }

    // MARK: - Fields not stored

    /// Fields that concern one connection only (RFC 9110 §7.6.1), which a cache never stores.
    static let hopByHopFields: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authorization", "trailer",
    ]

    /// `fields` without the hop-by-hop fields and those that `Connection` names.
    static func storableFields(of fields: HTTPFields) -> HTTPFields {
        // Most responses have none of them: kept as they are, the fields neither hashed nor
        // copied into new ones (every miss stores its head).
        guard fields.contains(where: { Self.isHopByHop($0.name.canonicalName) }) else { return fields }
        var excluded = Self.hopByHopFields
        for value in fields[values: .connection] {
            for name in value.split(separator: ",") { excluded.insert(name.trimmingWhitespace().lowercased()) }
        }
        return HTTPFields(fields.filter { !excluded.contains($0.name.canonicalName) })
    }

    /// Whether `name`, a canonical (lowercase) field name, is one of ``hopByHopFields``: told
    /// by its length first, which no other field of most responses shares. The proxy's own
    /// list of the fields it never passes on is made of it.
    package static func isHopByHop(_ name: String) -> Bool {
        switch name.utf8.count {
        case 2: return name == "te"
        case 7: return name == "upgrade" || name == "trailer"
        case 10: return name == "connection" || name == "keep-alive"
        case 16: return name == "proxy-connection"
        case 17: return name == "transfer-encoding"
        case 18: return name == "proxy-authenticate"
        case 19: return name == "proxy-authorization"
        default: return false
        }
    }
}
