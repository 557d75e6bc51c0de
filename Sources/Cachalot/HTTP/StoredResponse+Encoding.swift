import Foundation
import HTTPTypes

extension StoredResponse {
    /// The response in the binary form kept as a ``DiskCache`` entry's metadata.
    ///
    /// ```
    /// "CHR2"                      magic and version
    /// request time, response time Float64 bit patterns, seconds since 1970
    /// facts version, length       UInt16, UInt32; then the freshness facts:
    ///   date, corrected initial age, private and shared lifetimes: Float64 each
    ///   Vary's names              0 for `*`, or 1 and a string list
    ///   Cache-Control             UInt16 of flags; max-age, s-maxage, stale-while-revalidate,
    ///                             stale-if-error, max-stale, min-fresh: 0, or 1 and an Int64 each;
    ///                             the names of no-cache and of private: a string list each
    ///   targeted fields           a string list: the names the facts were computed with
    /// vary count, then fields     UInt32; name string, then 0 (absent) or 1 and a value string
    /// status code                 UInt16
    /// reason phrase               string
    /// field count, then fields    UInt32; name string, value string each
    /// ```
    ///
    /// Numbers are little-endian; a string is its UTF-8 length as a UInt32, then the bytes; a
    /// string list is a UInt32 count, then the strings. A time or a number of seconds that is not
    /// finite, or is beyond ±10¹³ seconds (300,000 years), makes the metadata unreadable: no clock
    /// or rule writes one, and ages and lifetimes computed from it must fit the whole seconds
    /// that callers make of them.
    ///
    /// Everything a cache decision needs comes before the head, which is checked when the
    /// metadata is read but decoded only when ``response`` is first read: a fresh hit whose
    /// caller wants only the body parses no header field. Facts stored by another version of the
    /// freshness facts (`FreshnessFacts`) are computed again from the head, with no targeted
    /// field (version 1, the only earlier one, had none). "CHR1", the earlier form (the times,
    /// then the head, then the varying fields, and no facts), is still read.
    public func encoded() -> Data {
        var writer = Writer()
        // Room for the facts and a head of a few fields, so that few appends grow the bytes.
        writer.bytes.reserveCapacity(256 + self.headCost)
        writer.append(Self.magic)
        writer.append(self.requestTime.timeIntervalSince1970.bitPattern)
        writer.append(self.responseTime.timeIntervalSince1970.bitPattern)
        writer.append(FreshnessFacts.version)
        let lengthOffset = writer.bytes.count
        writer.append(UInt32(0))
        writer.append(self.facts)
        writer.replace(UInt32(writer.bytes.count - lengthOffset - 4), at: lengthOffset)
        writer.append(UInt32(self.varyingFields.count))
        for field in self.varyingFields {
            writer.append(field.name)
            writer.append(optional: field.value)
        }
        let response = self.response
        writer.append(UInt16(clamping: response.status.code))
        writer.append(response.status.reasonPhrase)
        writer.append(UInt32(response.headerFields.count))
        for field in response.headerFields {
            writer.append(field.name.rawName)
            writer.append(field.value)
        }
        return Data(writer.bytes)
    }

    /// Reads a response written by ``encoded()``; `nil` if `data` is not one (damaged, or
    /// written by a later version).
    public init?(decoding data: Data) {
        guard let response = data.withUnsafeBytes({ Self.decode($0, of: data) }) else { return nil }
        self = response
    }

    private static func decode(_ bytes: UnsafeRawBufferPointer, of data: Data) -> StoredResponse? {
        var reader = Reader(bytes)
        guard let magic = reader.number(UInt32.self), let requestTime = reader.date(), let responseTime = reader.date()
        else {
            return nil
        }
        let head: EncodedHead
        let varyingFields: [VaryingField]
        var facts: FreshnessFacts?
        switch magic {
        case Self.magic:
            guard let factsVersion = reader.number(UInt16.self),
                let factsLength = reader.number(UInt32.self),
                let factsBytes = reader.take(Int(factsLength))
            else { return nil }
            if factsVersion == FreshnessFacts.version {
                var factsReader = Reader(factsBytes)
                facts = factsReader.facts()
                guard facts != nil, factsReader.isAtEnd else { return nil }
            }
            guard let fields = reader.varyingFields(), let encodedHead = reader.head(of: data) else { return nil }
            (head, varyingFields) = (encodedHead, fields)
        case Self.version1Magic:
            guard let encodedHead = reader.head(of: data), let fields = reader.varyingFields() else { return nil }
            (head, varyingFields) = (encodedHead, fields)
        default:
            return nil
        }
        guard reader.isAtEnd else { return nil }
        guard let facts else {
            // The earlier form, or facts of another version: computed again from the head.
            return StoredResponse(
                response: head.decode(),
                requestTime: requestTime,
                responseTime: responseTime,
                varyingFields: varyingFields
            )
        }
        return StoredResponse(
            head: head,
            requestTime: requestTime,
            responseTime: responseTime,
            varyingFields: varyingFields,
            facts: facts
        )
    }

    /// "CHR2" and "CHR1", as a little-endian UInt32 reads them.
    private static let magic: UInt32 = 0x3252_4843
    private static let version1Magic: UInt32 = 0x3152_4843
}

/// The status, reason and fields of a stored response, in the metadata they were read from,
/// already checked: decoding them cannot fail.
struct EncodedHead: Sendable {
    let data: Data
    /// Where the head is in `data`.
    let range: Range<Int>
    let fieldCount: Int

    /// What ``StoredResponse/headCost`` counts for the decoded head: each field's strings are
    /// stored with 8 bytes of lengths, and count 32 bytes more in memory.
    var cost: Int {
        256 + self.range.count + 24 * self.fieldCount
    }

    /// The status code, read without decoding the rest of the head.
    var statusCode: Int {
        self.data.withUnsafeBytes { bytes in
            Int(UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: self.range.lowerBound, as: UInt16.self)))
        }
    }

    func decode() -> HTTPResponse {
        self.data.withUnsafeBytes { bytes in
            var reader = Reader(UnsafeRawBufferPointer(rebasing: bytes[self.range]))
            let code = reader.checkedNumber(UInt16.self)
            let reason = reader.checkedString()
            let count = Int(reader.checkedNumber(UInt32.self))
            var fields: [HTTPField] = []
            fields.reserveCapacity(count)
            for _ in 0..<count {
                let name = reader.checkedString()
                let value = reader.checkedString()
                // Always a name: it was checked to be a token (RFC 9110 §5.6.2) when read.
                if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
            }
            return HTTPResponse(status: .init(code: Int(code), reasonPhrase: reason), headerFields: HTTPFields(fields))
        }
    }
}

// MARK: - Writing

private struct Writer {
    var bytes: [UInt8] = []

    mutating func append<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { self.bytes.append(contentsOf: $0) }
    }

    mutating func replace<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { value in
            self.bytes.replaceSubrange(offset..<offset + value.count, with: value)
        }
    }

    mutating func append(_ string: String) {
        self.append(UInt32(string.utf8.count))
        self.bytes.append(contentsOf: string.utf8)
    }

    mutating func append(optional string: String?) {
        if let string {
            self.bytes.append(1)
            self.append(string)
        } else {
            self.bytes.append(0)
        }
    }

    mutating func append(optional number: Int?) {
        if let number {
            self.bytes.append(1)
            self.append(Int64(number))
        } else {
            self.bytes.append(0)
        }
    }

    mutating func append(_ strings: [String]) {
        self.append(UInt32(strings.count))
        for string in strings { self.append(string) }
    }

    mutating func append(_ facts: FreshnessFacts) {
        for seconds in [
            facts.date.timeIntervalSince1970, facts.correctedInitialAge, facts.privateLifetime, facts.sharedLifetime,
        ] {
            self.append(seconds.bitPattern)
        }
        if let names = facts.varyNames {
            self.bytes.append(1)
            self.append(names)
        } else {
            self.bytes.append(0)
        }
        let directives = facts.directives
        let flags = [
            directives.isNoCache, directives.isNoStore, directives.isPrivate, directives.isPublic,
            directives.mustRevalidate, directives.proxyRevalidate, directives.mustUnderstand, directives.noTransform,
            directives.isImmutable, directives.isOnlyIfCached, directives.hasInvalidFreshness,
        ]
        self.append(flags.enumerated().reduce(UInt16(0)) { $1.element ? $0 | 1 << $1.offset : $0 })
        for number in [
            directives.maxAge, directives.sharedMaxAge, directives.staleWhileRevalidate, directives.staleIfError,
            directives.maxStale, directives.minFresh,
        ] {
            self.append(optional: number)
        }
        self.append(directives.noCacheFields)
        self.append(directives.privateFields)
        self.append(UInt32(facts.targets.count))
        for name in facts.targets { self.append(name.rawName) }
    }
}

// MARK: - Reading

/// Reads the binary form. The checked readers return `nil` at the end of the bytes or on
/// anything malformed; the `checked…` ones read what a checked reader already accepted.
private struct Reader {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var isAtEnd: Bool { self.position == self.bytes.count }

    mutating func take(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, count <= self.bytes.count - self.position else { return nil }
        defer { self.position += count }
        return UnsafeRawBufferPointer(rebasing: self.bytes[self.position..<self.position + count])
    }

    mutating func number<T: FixedWidthInteger>(_ type: T.Type) -> T? {
        self.take(MemoryLayout<T>.size).map { T(littleEndian: $0.loadUnaligned(as: T.self)) }
    }

    mutating func date() -> Date? {
        self.seconds().map(Date.init(timeIntervalSince1970:))
    }

    /// A time or a number of seconds: `nil` if it is not finite or is beyond ±10¹³ seconds.
    mutating func seconds() -> TimeInterval? {
        guard let seconds = self.number(UInt64.self).map(Double.init(bitPattern:)),
            seconds.magnitude <= Self.largestSeconds
        else { return nil }
        return seconds
    }

    /// The largest time or number of seconds, either side of 0, that metadata holds: 10¹³
    /// seconds. Sums and differences of a few of them are far from `Int.max` (about 9.2 × 10¹⁸).
    static let largestSeconds: TimeInterval = 1e13

    /// The bytes of a string that is valid UTF-8.
    mutating func stringBytes() -> UnsafeRawBufferPointer? {
        guard let count = self.number(UInt32.self), let bytes = self.take(Int(count)) else { return nil }
        // Header text is nearly always ASCII, which is valid UTF-8 as it is: checking for that
        // costs a fraction of a general validation.
        guard Self.isASCII(bytes) || String(validating: bytes, as: UTF8.self) != nil else { return nil }
        return bytes
    }

    mutating func string() -> String? {
        self.stringBytes().map { String(decoding: $0, as: UTF8.self) }
    }

    /// 0, or 1 and a string: `.some(nil)` for 0.
    mutating func optionalString() -> String?? {
        switch self.take(1)?.first {
        case 0: .some(nil)
        case 1: self.string().map { .some($0) }
        default: nil
        }
    }

    mutating func optionalNumber() -> Int?? {
        switch self.take(1)?.first {
        case 0: .some(nil)
        case 1: self.number(Int64.self).map { .some(Int($0)) }
        default: nil
        }
    }

    mutating func strings() -> [String]? {
        guard let count = self.number(UInt32.self), count <= self.bytes.count - self.position else { return nil }
        var strings: [String] = []
        for _ in 0..<count {
            guard let string = self.string() else { return nil }
            strings.append(string)
        }
        return strings
    }

    /// A string list of field names; `nil` if one is not a field name.
    mutating func fieldNames() -> [HTTPField.Name]? {
        guard let count = self.number(UInt32.self), count <= self.bytes.count - self.position else { return nil }
        // The usual case: no name, no array.
        guard count > 0 else { return [] }
        var names: [HTTPField.Name] = []
        for _ in 0..<count {
            guard let string = self.string(), let name = HTTPField.Name(string) else { return nil }
            names.append(name)
        }
        return names
    }

    mutating func varyingFields() -> [StoredResponse.VaryingField]? {
        guard let count = self.number(UInt32.self), count <= self.bytes.count - self.position else { return nil }
        var fields: [StoredResponse.VaryingField] = []
        for _ in 0..<count {
            guard let name = self.string(), let value = self.optionalString() else { return nil }
            fields.append(StoredResponse.VaryingField(name: name, value: value))
        }
        return fields
    }

    /// Checks the head that starts here, in `data`, whose bytes these are, and steps over it:
    /// its lengths, its status code, field names that are tokens, and text that is UTF-8.
    mutating func head(of data: Data) -> EncodedHead? {
        let start = self.position
        guard let code = self.number(UInt16.self), (100...999).contains(code) else { return nil }
        guard self.stringBytes() != nil, let count = self.number(UInt32.self),
            count <= self.bytes.count - self.position
        else { return nil }
        for _ in 0..<count {
            // A name is a token, and so ASCII: its bytes need no other check.
            guard let nameLength = self.number(UInt32.self), let name = self.take(Int(nameLength)), !name.isEmpty,
                name.allSatisfy(Self.isTokenCharacter), self.stringBytes() != nil
            else { return nil }
        }
        return EncodedHead(data: data, range: start..<self.position, fieldCount: Int(count))
    }

    mutating func facts() -> FreshnessFacts? {
        guard let date = self.seconds(), let correctedInitialAge = self.seconds(),
            let privateLifetime = self.seconds(), let sharedLifetime = self.seconds(),
            let hasVaryNames = self.take(1)?.first, hasVaryNames <= 1
        else { return nil }
        var varyNames: [String]?
        if hasVaryNames == 1 {
            guard let names = self.strings() else { return nil }
            varyNames = names
        }
        guard let flags = self.number(UInt16.self) else { return nil }
        guard let maxAge = self.optionalNumber(), let sharedMaxAge = self.optionalNumber(),
            let staleWhileRevalidate = self.optionalNumber(), let staleIfError = self.optionalNumber(),
            let maxStale = self.optionalNumber(), let minFresh = self.optionalNumber(),
            let noCacheFields = self.strings(), let privateFields = self.strings(),
            let targets = self.fieldNames()
        else { return nil }
        var directives = CacheControl()
        func flag(_ bit: Int) -> Bool { flags & 1 << bit != 0 }
        directives.isNoCache = flag(0)
        directives.isNoStore = flag(1)
        directives.isPrivate = flag(2)
        directives.isPublic = flag(3)
        directives.mustRevalidate = flag(4)
        directives.proxyRevalidate = flag(5)
        directives.mustUnderstand = flag(6)
        directives.noTransform = flag(7)
        directives.isImmutable = flag(8)
        directives.isOnlyIfCached = flag(9)
        directives.hasInvalidFreshness = flag(10)
        directives.maxAge = maxAge
        directives.sharedMaxAge = sharedMaxAge
        directives.staleWhileRevalidate = staleWhileRevalidate
        directives.staleIfError = staleIfError
        directives.maxStale = maxStale
        directives.minFresh = minFresh
        directives.noCacheFields = noCacheFields
        directives.privateFields = privateFields
        return FreshnessFacts(
            directives: directives,
            targets: targets,
            date: Date(timeIntervalSince1970: date),
            correctedInitialAge: correctedInitialAge,
            privateLifetime: privateLifetime,
            sharedLifetime: sharedLifetime,
            varyNames: varyNames
        )
    }

    mutating func checkedNumber<T: FixedWidthInteger>(_ type: T.Type) -> T {
        defer { self.position += MemoryLayout<T>.size }
        return T(littleEndian: self.bytes.loadUnaligned(fromByteOffset: self.position, as: T.self))
    }

    mutating func checkedString() -> String {
        let count = Int(self.checkedNumber(UInt32.self))
        defer { self.position += count }
        return String(decoding: self.bytes[self.position..<self.position + count], as: UTF8.self)
    }

    /// Whether every byte is below 0x80, checked eight at a time.
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        var bits: UInt64 = 0
        while index + 8 <= bytes.count {
            bits |= bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < bytes.count {
            bits |= UInt64(bytes[index])
            index += 1
        }
        return bits & 0x8080_8080_8080_8080 == 0
    }

    /// A character of a token (RFC 9110 §5.6.2), as field names are.
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        let (word, bit) = (Int(byte) >> 6, UInt64(1) << (byte & 63))
        return word < 2 && (word == 0 ? Self.tokenCharacters.0 : Self.tokenCharacters.1) & bit != 0
    }

    /// The token characters as bits, for bytes 0 to 63 and 64 to 127: `!#$%&'*+-.^_`|~`,
    /// digits and letters.
    private static let tokenCharacters: (UInt64, UInt64) = (0x03FF_6CFA_0000_0000, 0x57FF_FFFF_C7FF_FFFE)
}
