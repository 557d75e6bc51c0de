/// Reads a Structured Fields Dictionary (RFC 8941 §3.2 and §4.2.2) as the directives of a
/// targeted cache-control field (RFC 9213 §2.1): the members in order, each as a directive name
/// and its argument as text.
///
/// Values map back to cache directive arguments: Boolean true to no argument, Integer and
/// Decimal to their digits (so that `max-age=1.5` stays malformed rather than coerced), String
/// and Token to their text. A member whose value is Boolean false is left out, and one whose
/// value is a Byte Sequence or an Inner List gets an empty argument, which no directive accepts
/// as a number. Parameters are ignored. A key given twice keeps its first place and its last
/// value, as RFC 8941 says (Boolean
/// false as the last value removes it).
///
/// A directive whose argument RFC 9213 §2.1 types as an Integer (``integerDirectives``) with a
/// value of another type (`max-age="60"`, `max-age=1.5`, a bare `max-age`) makes the whole
/// field invalid, as a parse error does: the cache then falls back to `Cache-Control`.
struct StructuredFieldDictionary {
    private let bytes: [UInt8]
    private var position = 0

    private init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The members of the field lines `values` read as one Dictionary, or `nil` if it is empty
    /// (RFC 9213 treats an empty targeted field as absent) or on any parse error.
    static func parse(_ values: [String]) -> [(name: String, argument: String?)]? {
        var bytes: [UInt8] = []
        for (index, value) in values.enumerated() {
            if index > 0 {
                bytes.append(UInt8(ascii: ","))
                bytes.append(UInt8(ascii: " "))
            }
            bytes.append(contentsOf: value.utf8)
        }
        var parser = Self(bytes)
        return parser.dictionary()
    }

    /// The directives whose argument is an Integer (RFC 9213 §2.1, RFC 9111 §5.2.2, RFC 5861).
    static let integerDirectives: Set<String> = ["max-age", "s-maxage", "stale-while-revalidate", "stale-if-error"]

    /// What a member's value gives the directive.
    private enum Value {
        /// The directive, with this argument or none; whether the value was an Integer.
        case argument(String?, isInteger: Bool = false)
        /// No directive: Boolean false.
        case omitted
    }

    private var peek: UInt8? { self.position < self.bytes.count ? self.bytes[self.position] : nil }

    private mutating func skipSpaces(includingTabs: Bool = false) {
        while let byte = self.peek, byte == UInt8(ascii: " ") || (includingTabs && byte == UInt8(ascii: "\t")) {
            self.position += 1
        }
    }

    private mutating func dictionary() -> [(name: String, argument: String?)]? {
        var members: [(name: String, argument: String?, isInteger: Bool)] = []
        self.skipSpaces()
        guard self.peek != nil else { return nil }
        while true {
            guard let name = self.key() else { return nil }
            let value: Value
            if self.peek == UInt8(ascii: "=") {
                self.position += 1
                guard let item = self.itemOrInnerList() else { return nil }
                value = item
            } else {
                value = .argument(nil)
                guard self.parameters() else { return nil }
            }
            let index = members.firstIndex { $0.name == name }
            switch (value, index) {
            case (.argument(let argument, let isInteger), let index?): members[index] = (name, argument, isInteger)
            case (.argument(let argument, let isInteger), nil): members.append((name, argument, isInteger))
            case (.omitted, let index?): members.remove(at: index)
            case (.omitted, nil): break
            }
            self.skipSpaces(includingTabs: true)
            guard let byte = self.peek else {
                guard members.allSatisfy({ $0.isInteger || !Self.integerDirectives.contains($0.name) }) else {
                    return nil
                }
                return members.map { ($0.name, $0.argument) }
            }
            guard byte == UInt8(ascii: ",") else { return nil }
            self.position += 1
            self.skipSpaces(includingTabs: true)
            // A trailing comma is an error.
            guard self.peek != nil else { return nil }
        }
    }

    /// A member's value, an item or an inner list with their parameters; `nil` on a parse error.
    private mutating func itemOrInnerList() -> Value? {
        if self.peek == UInt8(ascii: "(") {
            guard self.innerList() else { return nil }
            return .argument("")
        }
        guard let value = self.bareItem(), self.parameters() else { return nil }
        return value
    }

    /// A bare item (RFC 8941 §4.2.3.1); `nil` on a parse error.
    private mutating func bareItem() -> Value? {
        guard let byte = self.peek else { return nil }
        switch byte {
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return self.number().map { .argument($0, isInteger: !$0.contains(".")) }
        case UInt8(ascii: "\""):
            return self.string().map { .argument($0) }
        case UInt8(ascii: "*"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"):
            return .argument(self.token())
        case UInt8(ascii: ":"):
            return self.byteSequence() ? .argument("") : nil
        case UInt8(ascii: "?"):
            self.position += 1
            switch self.peek {
            case UInt8(ascii: "1"):
                self.position += 1
                return .argument(nil)
            case UInt8(ascii: "0"):
                self.position += 1
                return .omitted
            default:
                return nil
            }
        default:
            return nil
        }
    }

    /// A key: a lowercase letter or `*`, then lowercase letters, digits, `_`, `-`, `.`, `*`.
    private mutating func key() -> String? {
        guard let first = self.peek, Self.isLowercase(first) || first == UInt8(ascii: "*") else { return nil }
        let start = self.position
        while let byte = self.peek,
            Self.isLowercase(byte) || Self.isDigit(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "*")
        {
            self.position += 1
        }
        return String(decoding: self.bytes[start..<self.position], as: UTF8.self)
    }

    /// `;key[=bare-item]` parameters, ignored; `false` on a parse error.
    private mutating func parameters() -> Bool {
        while self.peek == UInt8(ascii: ";") {
            self.position += 1
            self.skipSpaces()
            guard self.key() != nil else { return false }
            if self.peek == UInt8(ascii: "=") {
                self.position += 1
                guard self.bareItem() != nil else { return false }
            }
        }
        return true
    }

    /// `(item item ...)` with parameters, ignored; `false` on a parse error.
    private mutating func innerList() -> Bool {
        self.position += 1
        while true {
            self.skipSpaces()
            if self.peek == UInt8(ascii: ")") {
                self.position += 1
                return self.parameters()
            }
            guard self.bareItem() != nil, self.parameters() else { return false }
            guard let byte = self.peek, byte == UInt8(ascii: " ") || byte == UInt8(ascii: ")") else { return false }
        }
    }

    /// An Integer (up to 15 digits) or a Decimal (up to 12 digits, a point, 1 to 3 digits), as
    /// written.
    private mutating func number() -> String? {
        let start = self.position
        if self.peek == UInt8(ascii: "-") { self.position += 1 }
        let digitsStart = self.position
        while let byte = self.peek, Self.isDigit(byte) { self.position += 1 }
        let integerDigits = self.position - digitsStart
        guard integerDigits >= 1 else { return nil }
        if self.peek == UInt8(ascii: ".") {
            guard integerDigits <= 12 else { return nil }
            self.position += 1
            let fractionStart = self.position
            while let byte = self.peek, Self.isDigit(byte) { self.position += 1 }
            guard (1...3).contains(self.position - fractionStart) else { return nil }
        } else {
            guard integerDigits <= 15 else { return nil }
        }
        return String(decoding: self.bytes[start..<self.position], as: UTF8.self)
    }

    /// A String: printable ASCII between quotes, with `\"` and `\\` escapes; its text.
    private mutating func string() -> String? {
        self.position += 1
        var result: [UInt8] = []
        while let byte = self.peek {
            self.position += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: result, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let escaped = self.peek, escaped == UInt8(ascii: "\"") || escaped == UInt8(ascii: "\\") else {
                    return nil
                }
                self.position += 1
                result.append(escaped)
            case 0x20...0x7E:
                result.append(byte)
            default:
                return nil
            }
        }
        return nil
    }

    /// A Token: a letter or `*`, then token characters, `:` and `/`.
    private mutating func token() -> String {
        let start = self.position
        self.position += 1
        while let byte = self.peek,
            Self.isTokenCharacter(byte) || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "/")
        {
            self.position += 1
        }
        return String(decoding: self.bytes[start..<self.position], as: UTF8.self)
    }

    /// A Byte Sequence, `:base64:`; `false` on a parse error.
    private mutating func byteSequence() -> Bool {
        self.position += 1
        while let byte = self.peek {
            self.position += 1
            if byte == UInt8(ascii: ":") { return true }
            guard
                Self.isLowercase(byte) || Self.isDigit(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "=")
            else { return false }
        }
        return false
    }

    private static func isLowercase(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// A `tchar` (RFC 9110 §5.6.2).
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        if Self.isLowercase(byte) || Self.isDigit(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) {
            return true
        }
        return "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
}
