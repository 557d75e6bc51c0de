import HTTPTypes

extension StoredResponse {
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

    /// The request's lines of field `name`, as one normalized value (see ``VaryingField/value``);
    /// `nil` if there are none or `name` is not a field name.
    static func normalizedValue(of name: String, in fields: HTTPFields) -> String? {
        guard let fieldName = HTTPField.Name(name) else { return nil }
        let values = fields[values: fieldName]
        guard !values.isEmpty else { return nil }
        return Self.unorderedListFields.contains(fieldName.canonicalName)
            ? Self.normalizedUnorderedList(values) : Self.normalizedList(values)
    }

    /// Fields whose value is a list of case-insensitive members in no particular order
    /// (RFC 9110 §12.5.2 to §12.5.4): the weight of a member goes with it, and the grammar
    /// has no quoted strings and no whitespace but around `;`.
    static let unorderedListFields: Set<String> = ["accept-encoding", "accept-language", "accept-charset"]

    /// `values`, the lines of one field, read as one list: members without the whitespace around
    /// them, joined with ", ", and runs of whitespace within a member made one space. Quoted
    /// strings are kept as they are, commas and whitespace included.
    static func normalizedList(_ values: [String]) -> String {
        var result: [UInt8] = []
        result.reserveCapacity(values.reduce(0) { $0 + $1.utf8.count + 2 })
        let comma = UInt8(ascii: ",")
        let space = UInt8(ascii: " ")
        for (index, value) in values.enumerated() {
            if index > 0 {
                result.append(comma)
                result.append(space)
            }
            var isInMember = false
            var hasPendingSpace = false
            var isQuoted = false
            var isEscaped = false
            for byte in value.utf8 {
                if isQuoted {
                    result.append(byte)
                    if isEscaped {
                        isEscaped = false
                    } else if byte == UInt8(ascii: "\\") {
                        isEscaped = true
                    } else if byte == UInt8(ascii: "\"") {
                        isQuoted = false
                    }
                } else if byte == comma {
                    result.append(comma)
                    result.append(space)
                    (isInMember, hasPendingSpace) = (false, false)
                } else if FieldScanner.isWhitespace(byte) {
                    hasPendingSpace = isInMember
                } else {
                    if hasPendingSpace { result.append(space) }
                    result.append(byte)
                    (isInMember, hasPendingSpace) = (true, false)
                    isQuoted = byte == UInt8(ascii: "\"")
                }
            }
        }
        // An empty last member leaves the space of ", ".
        if result.last == space { result.removeLast() }
        return String(decoding: result, as: UTF8.self)
    }

    /// `values` read as one list of case-insensitive members in no particular order: each
    /// member lowercased and without whitespace, empty ones dropped, the rest sorted and joined
    /// with ", ".
    static func normalizedUnorderedList(_ values: [String]) -> String {
        var members: [String] = []
        for value in values {
            for member in value.utf8.split(separator: UInt8(ascii: ",")) {
                var bytes: [UInt8] = []
                bytes.reserveCapacity(member.count)
                for byte in member where !FieldScanner.isWhitespace(byte) {
                    bytes.append(byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte)
                }
                if !bytes.isEmpty { members.append(String(decoding: bytes, as: UTF8.self)) }
            }
        }
        // Ordered by bytes, whatever the locale.
        members.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        return members.joined(separator: ", ")
    }
}
