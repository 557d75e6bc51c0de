import Foundation

/// What a purge removes from a cache's tiers, said as a value rather than a predicate, so that a
/// tier that indexes its keys and tags (such as `CachalotPostgres`' tables) finds the entries
/// without reading every other one. ``matches(key:stored:)`` is the meaning every tier keeps.
public enum CacheRemoval: Sendable, Hashable {
    /// The entry for a URL, in the loader's key form (see ``ResourceLoader/removeResponses(for:)``),
    /// and every `Vary` variant of it: keys that are the URL, or start with it and a line feed.
    case url(String)
    /// Every entry whose key starts with the prefix, byte for byte (as UTF-8).
    case prefix(String)
    /// Every entry whose stored response is tagged with the tag (see
    /// ``StoredResponse/surrogateKeys``); tags are compared exactly.
    case tag(String)
    /// Every entry whose stored response was received before the date.
    case storedBefore(Date)
    /// Every entry.
    case all

    /// Whether the entry under `key` is removed, given a way to read its stored response (`nil`
    /// for a list of variants, which only ``url(_:)``, ``prefix(_:)`` and ``all`` remove).
    ///
    /// - Parameters:
    ///   - key: The entry's key.
    ///   - stored: Reads the entry's stored response; called only for a tag or a date.
    public func matches(key: String, stored: () -> StoredResponse?) -> Bool {
        switch self {
        // Keys and tags are compared as bytes, as a database compares them, not as Unicode
        // strings, which take canonically equivalent ones as equal.
        case .url(let url):
            key.utf8.starts(with: url.utf8)
                && (key.utf8.count == url.utf8.count || key.utf8.dropFirst(url.utf8.count).first == 0x0A)
        case .prefix(let prefix): key.utf8.starts(with: prefix.utf8)
        case .tag(let tag): stored()?.surrogateKeys.contains { $0.utf8.elementsEqual(tag.utf8) } ?? false
        case .storedBefore(let date): stored().map { $0.responseTime < date } ?? false
        case .all: true
        }
    }
}
