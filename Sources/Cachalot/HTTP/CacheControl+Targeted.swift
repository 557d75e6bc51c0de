import HTTPTypes

extension CacheControl {
    /// The directives that govern how a cache with the target list `targets` stores a response
    /// with `fields`, and for how long (RFC 9213 §2.2).
    ///
    /// Those of the first field on the list that the response carries with a valid, non-empty
    /// value, read as a Structured Fields Dictionary: `Cache-Control` and `Expires` are then
    /// ignored (`isTargeted` is `true`). Without one, those of `Cache-Control`. With an empty
    /// list, `Cache-Control` is read as it always is, and no other field is looked at.
    static func governing(
        _ fields: HTTPFields,
        targets: [HTTPField.Name]
    ) -> (directives: CacheControl, isTargeted: Bool) {
        for name in targets {
            let values = fields[values: name]
            if !values.isEmpty, let members = StructuredFieldDictionary.parse(values) {
                return (CacheControl(directives: members), true)
            }
        }
        return (CacheControl(fields[values: .cacheControl]), false)
    }
}
