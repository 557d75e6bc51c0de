import Foundation
import HTTPTypes

extension FuzzTarget {
    /// Reads `bytes`, as text, as the fields of a response and of two requests, and stores the
    /// response for the first request as the loader does when it varies: the `Vary` names, the
    /// request's values of them, the variant's key, and the list of names kept under the URL.
    ///
    /// The text is three blocks separated by an empty line: the response's fields, the first
    /// request's, the second request's; a field is a line `name: value` (lines whose name is not
    /// a field name are skipped).
    ///
    /// Invariants:
    /// - the stored varying fields are the `Vary` names, in order, and the response matches the
    ///   request it was stored for unless `Vary` is `*`;
    /// - encoded and decoded, it matches the same requests, with the same varying fields;
    /// - a request that it matches has the same variant key as the one it was stored for;
    /// - a variant's key is the same whether made from a request's parts or from the URL's
    ///   string, and hashes the same;
    /// - the names kept under the URL (``TierChain``'s variants metadata) read back as they
    ///   were written.
    public static func vary(_ bytes: UnsafeRawBufferPointer) {
        let blocks = String(decoding: bytes, as: UTF8.self).split(
            separator: "\n\n",
            maxSplits: 2,
            omittingEmptySubsequences: false
        )
        func fields(_ index: Int) -> HTTPFields {
            guard index < blocks.count else { return HTTPFields() }
            var fields = HTTPFields()
            for line in blocks[index].split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = HTTPField.Name(String(parts[0])) else { continue }
                fields.append(HTTPField(name: name, value: parts.count > 1 ? String(parts[1]) : ""))
            }
            return fields
        }
        let response = HTTPResponse(status: .ok, headerFields: fields(0))
        var first = HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/a?b")
        first.headerFields = fields(1)
        var second = first
        second.headerFields = fields(2)

        let stored = StoredResponse(request: first, response: response, requestTime: Self.now, responseTime: Self.now)
        let names = stored.facts.varyNames
        precondition(
            stored.varyingFields.map(\.name) == (names ?? []),
            "the varying fields are not the names that Vary lists"
        )
        precondition(stored.matches(first) == (names != nil), "a response does not match the request it was for")
        guard let decoded = StoredResponse(decoding: stored.encoded()) else {
            preconditionFailure("a stored response does not decode")
        }
        precondition(decoded.varyingFields == stored.varyingFields, "the varying fields changed in a round trip")
        for request in [first, second] {
            precondition(decoded.matches(request) == stored.matches(request), "a round trip changed what matches")
        }
        Self.use(stored)
        guard let names, !names.isEmpty else { return }

        // The keys of the variants.
        guard let url = ResponseKey(of: first) else { preconditionFailure("a request with a URL has no key") }
        let firstKey = url.variant(names: names, request: first)
        let secondKey = url.variant(names: names, request: second)
        if stored.matches(second) {
            precondition(firstKey == secondKey, "a request that the response matches has another variant's key")
        }
        for (key, request) in [(firstKey, first), (secondKey, second)] {
            let string = CacheKey.variant(of: url.string, names: names, request: request)
            let fromString = ResponseKey(string)
            precondition(key == fromString && key.string == string, "a variant's key differs by how it was made")
            precondition(key.hashValue == fromString.hashValue, "equal variant keys hash differently")
        }

        // The names under the URL's key.
        let entry = DataCacheEntry(
            key: url.string,
            data: Data(),
            metadata: TierChain.variantsMetadata(names),
            created: Self.now
        )
        guard case .variants(let read)? = TierChain.decode(entry) else {
            preconditionFailure("the variants metadata does not read as variants")
        }
        precondition(read == names, "the Vary names \(names) read back as \(read)")
    }
}
