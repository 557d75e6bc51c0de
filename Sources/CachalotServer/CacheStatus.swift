import Cachalot
import HTTPTypes

/// The proxy's member of the `Cache-Status` field (RFC 9211): whether it answered from its
/// store, why it went to the origin, what the origin said, and how fresh the answer is.
struct CacheStatus: Sendable, CustomStringConvertible {
    /// The cache's name, the member's token.
    var name: String
    var hit = false
    var forward: String?
    var forwardStatus: Int?
    var timeToLive: Int?
    var stored = false
    var collapsed = false
    var detail: String?

    /// The status of an answer the loader gave.
    init(name: String, answer: ResourceStream) {
        self.init(
            name: name,
            source: answer.source,
            forwardReason: answer.forwardReason,
            timeToLive: answer.timeToLive,
            collapsed: answer.isCollapsed,
            storing: answer.isStoring,
            status: answer.response.status.code
        )
    }

    /// The status of a whole answer the loader gave.
    init(name: String, resource: Resource) {
        self.init(
            name: name,
            source: resource.source,
            forwardReason: resource.forwardReason,
            timeToLive: resource.timeToLive,
            collapsed: false,
            storing: false,
            status: resource.statusCode
        )
    }

    private init(
        name: String,
        source: Resource.Source,
        forwardReason: Resource.ForwardReason?,
        timeToLive: Int?,
        collapsed: Bool,
        storing: Bool,
        status: @autoclosure () -> Int
    ) {
        self.name = name
        self.timeToLive = timeToLive
        self.collapsed = collapsed
        switch source {
        case .memory, .disk:
            self.hit = true
        case .shared:
            self.hit = true
            self.detail = "shared"
        case .stale(.whileRevalidating):
            self.hit = true
            self.detail = "stale-while-revalidate"
        case .stale(.maxStale), .stale(.policy):
            self.hit = true
            self.detail = "stale"
        case .stale(.originError):
            self.forward = forwardReason?.rawValue ?? "stale"
            self.detail = "stale-if-error"
        case .stale(.unreachable):
            self.forward = forwardReason?.rawValue ?? "stale"
            self.detail = "stale-if-unreachable"
        case .revalidated:
            self.forward = forwardReason?.rawValue ?? "stale"
            self.forwardStatus = 304
        case .network:
            self.forward = forwardReason?.rawValue ?? "miss"
            self.forwardStatus = status()
            self.stored = storing
            self.timeToLive = nil
        case .generated:
            self.detail = "only-if-cached"
        }
    }

    /// A status that says nothing yet but the cache's name.
    init(name: String) {
        self.name = name
    }

    /// The status of a request the proxy could not answer from the origin: `detail` says why.
    init(name: String, forward: String?, detail: String) {
        self.name = name
        self.forward = forward
        self.detail = detail
    }

    var description: String {
        String(unsafeUninitializedCapacity: self.length) { storage in
            var line = ByteWriter(storage)
            self.write(into: &line)
            return line.count
        }
    }

    /// The bytes ``write(into:)`` writes.
    var length: Int {
        var length = self.name.utf8.count
        if self.hit { length += "; hit".utf8.count }
        if let forward { length += "; fwd=".utf8.count + forward.utf8.count }
        if let forwardStatus { length += "; fwd-status=".utf8.count + ByteWriter.decimalLength(forwardStatus) }
        if let timeToLive { length += "; ttl=".utf8.count + ByteWriter.decimalLength(timeToLive) }
        if self.stored { length += "; stored".utf8.count }
        if self.collapsed { length += "; collapsed".utf8.count }
        if let detail { length += "; detail=".utf8.count + Self.item(detail).utf8.count }
        return length
    }

    /// Writes the member as the field has it: a hit writes it into its response's head, with no
    /// string made of it (the access log makes one, off the event loop's path when it is off).
    func write(into line: inout ByteWriter) {
        line.write(self.name)
        if self.hit { line.write("; hit") }
        if let forward {
            line.write("; fwd=")
            line.write(forward)
        }
        if let forwardStatus {
            line.write("; fwd-status=")
            line.write(decimal: forwardStatus)
        }
        if let timeToLive {
            line.write("; ttl=")
            line.write(decimal: timeToLive)
        }
        if self.stored { line.write("; stored") }
        if self.collapsed { line.write("; collapsed") }
        if let detail {
            line.write("; detail=")
            line.write(Self.item(detail))
        }
    }

    /// `text` as a Structured Field item: a token if it is one, else a quoted string.
    private static func item(_ text: String) -> String {
        let isToken =
            text.first.map { $0.isLetter && $0.isASCII } == true
            && text.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                    UInt8(ascii: ":"), UInt8(ascii: "/"):
                    true
                default:
                    false
                }
            }
        if isToken { return text }
        let escaped = text.unicodeScalars.filter { $0.value >= 32 && $0.value < 127 }.map { scalar -> String in
            scalar == "\"" || scalar == "\\" ? "\\\(scalar)" : String(scalar)
        }
        return "\"" + escaped.joined() + "\""
    }
}
