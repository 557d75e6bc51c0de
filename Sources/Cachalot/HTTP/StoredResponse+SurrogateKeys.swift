import HTTPTypes

extension StoredResponse {
    /// The tags the origin gave the response for purging groups of responses at once: the
    /// space-separated members of `Surrogate-Key` (Fastly, Varnish's xkey) and the
    /// comma-separated members of `Cache-Tag` (Cloudflare), each field on every line it has.
    public var surrogateKeys: Set<String> {
        var keys: Set<String> = []
        let fields = self.response.headerFields
        for value in fields[values: Self.surrogateKey] {
            for key in value.split(whereSeparator: { $0 == " " || $0 == "\t" }) { keys.insert(String(key)) }
        }
        for value in fields[values: Self.cacheTag] {
            for key in value.split(separator: ",") {
                let trimmed = key.trimmingPrefix { $0 == " " || $0 == "\t" }
                let tag = trimmed.reversed().drop { $0 == " " || $0 == "\t" }.reversed()
                if !tag.isEmpty { keys.insert(String(tag)) }
            }
        }
        return keys
    }

    // Valid field names: the initializers cannot fail.
    static let surrogateKey = HTTPField.Name("Surrogate-Key")!
    static let cacheTag = HTTPField.Name("Cache-Tag")!
}
