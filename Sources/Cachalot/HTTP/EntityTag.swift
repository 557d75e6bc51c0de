/// An entity tag (RFC 9110 §8.8.3): `"xyzzy"`, or `W/"xyzzy"` for a weak one.
struct EntityTag: Hashable, Sendable {
    /// Whether the tag is weak (`W/` before it).
    var isWeak: Bool
    /// The opaque tag, without its quotes.
    var opaque: Substring

    /// The tag `text` is, spaces and tabs around it aside, or `nil` if it is not one.
    init?(_ text: String) {
        guard let tags = EntityTag.list([text]), tags.count == 1 else { return nil }
        self = tags[0]
    }

    private init(isWeak: Bool, opaque: Substring) {
        self.isWeak = isWeak
        self.opaque = opaque
    }

    /// The tags of the field lines `values` read as one list (`1#entity-tag`), or `nil` if any
    /// member is not an entity tag. Empty members are skipped (RFC 9110 §5.6.1.2).
    static func list(_ values: [String]) -> [EntityTag]? {
        var tags: [EntityTag] = []
        for value in values {
            let utf8 = value.utf8
            var index = utf8.startIndex
            func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
            while index < utf8.endIndex {
                let byte = utf8[index]
                if isSpace(byte) || byte == UInt8(ascii: ",") {
                    index = utf8.index(after: index)
                    continue
                }
                var isWeak = false
                if byte == UInt8(ascii: "W") {
                    let slash = utf8.index(after: index)
                    guard slash < utf8.endIndex, utf8[slash] == UInt8(ascii: "/") else { return nil }
                    isWeak = true
                    index = utf8.index(after: slash)
                }
                guard index < utf8.endIndex, utf8[index] == UInt8(ascii: "\"") else { return nil }
                let start = utf8.index(after: index)
                // etagc: `!`, `#` to `~`, and obs-text; a tag ends at the next quote.
                guard let end = utf8[start...].firstIndex(where: { $0 == UInt8(ascii: "\"") }),
                    utf8[start..<end].allSatisfy({ $0 == 0x21 || ($0 >= 0x23 && $0 != 0x7F) })
                else { return nil }
                tags.append(EntityTag(isWeak: isWeak, opaque: value[start..<end]))
                index = utf8.index(after: end)
                // After a tag: whitespace, then a comma or the end.
                while index < utf8.endIndex, isSpace(utf8[index]) { index = utf8.index(after: index) }
                guard index == utf8.endIndex || utf8[index] == UInt8(ascii: ",") else { return nil }
            }
        }
        return tags
    }

    /// Strong comparison (RFC 9110 §8.8.3.2): both strong, and the same opaque tag.
    func strongMatches(_ other: EntityTag) -> Bool {
        !self.isWeak && !other.isWeak && self.opaque == other.opaque
    }

    /// Weak comparison: the same opaque tag, weak or strong.
    func weakMatches(_ other: EntityTag) -> Bool {
        self.opaque == other.opaque
    }
}
