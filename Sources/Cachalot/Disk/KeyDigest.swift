import Crypto

/// The SHA-256 digest of a cache key: the name of its entry's file and its identity in the
/// journal. No key, however long or strange, can reach outside the cache directory or exceed a
/// file-name limit through its digest.
package struct KeyDigest: Hashable, Sendable {
    let words: (UInt64, UInt64, UInt64, UInt64)

    package init(key: String) {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var key = key
        let digest = key.withUTF8 { SHA256.hash(data: $0) }
        withUnsafeMutableBytes(of: &words) { target in
            digest.withUnsafeBytes { source in target.copyMemory(from: source) }
        }
        self.words = words
    }

    /// Reads a digest from its 32 raw bytes.
    init(bytes: UnsafeRawBufferPointer) {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes.prefix(32)))
        }
        self.words = words
    }

    /// Reads a digest from 64 hexadecimal digits, as in a file name; `nil` if it is not one.
    init?(hexadecimal: Substring) {
        guard hexadecimal.utf8.count == 64 else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(32)
        var iterator = hexadecimal.utf8.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            guard let high = Self.nibble(high), let low = Self.nibble(low) else { return nil }
            bytes.append(high << 4 | low)
        }
        self = bytes.withUnsafeBytes { KeyDigest(bytes: $0) }
    }

    /// The 32 raw bytes.
    package var bytes: [UInt8] {
        withUnsafeBytes(of: self.words) { Array($0) }
    }

    /// Appends the 32 raw bytes to `bytes`.
    func append(to bytes: inout [UInt8]) {
        withUnsafeBytes(of: self.words) { bytes.append(contentsOf: $0) }
    }

    /// The first byte, whose two digits name the subdirectory of `entries/` that holds the file.
    var subdirectory: UInt8 {
        withUnsafeBytes(of: self.words) { $0[0] }
    }

    /// 64 lowercase hexadecimal digits.
    var hexadecimal: String {
        self.path(under: [])
    }

    /// `<directory>/<first two digits>/<64 digits>`, built in one allocation; `directory` is
    /// the UTF-8 of the directory's path, or empty for the bare name.
    func path(under directory: [UInt8]) -> String {
        let prefixLength = directory.isEmpty ? 0 : directory.count + 4
        return String(unsafeUninitializedCapacity: prefixLength + 64) { buffer in
            let base = buffer.baseAddress!
            directory.withUnsafeBufferPointer { directory in
                if let source = directory.baseAddress { base.update(from: source, count: directory.count) }
            }
            let name = base + prefixLength
            withUnsafeBytes(of: self.words) { bytes in
                for index in 0..<32 {
                    let byte = bytes[index]
                    name[2 &* index] = Self.digit(byte &>> 4)
                    name[2 &* index &+ 1] = Self.digit(byte & 0x0F)
                }
            }
            if prefixLength > 0 {
                base[directory.count] = UInt8(ascii: "/")
                base[directory.count &+ 1] = name[0]
                base[directory.count &+ 2] = name[1]
                base[directory.count &+ 3] = UInt8(ascii: "/")
            }
            return prefixLength + 64
        }
    }

    /// The two lowercase hexadecimal digits of `byte`.
    static func hexadecimal(_ byte: UInt8) -> String {
        String(decoding: [Self.digit(byte &>> 4), Self.digit(byte & 0x0F)], as: UTF8.self)
    }

    /// The number of the subdirectory of `entries/` that `name` spells (two lowercase
    /// hexadecimal digits), or `nil` if it spells none.
    static func subdirectoryNumber(_ name: String) -> UInt8? {
        let digits = Array(name.utf8)
        guard digits.count == 2, let high = Self.nibble(digits[0]), let low = Self.nibble(digits[1]) else { return nil }
        return high << 4 | low
    }

    /// Whether `character` is a lowercase hexadecimal digit.
    static func isDigit(_ character: UInt8) -> Bool {
        Self.nibble(character) != nil
    }

    /// Calls `body` with `<first two digits>/<64 digits>`, the path relative to `entries/`, as a
    /// C string built on the stack.
    func withRelativePath<Result, Failure: Error>(
        _ body: (UnsafePointer<CChar>) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        // 2 + 1 + 64 characters and a terminating zero fit in 9 words.
        var storage: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0)
        return try withUnsafeMutableBytes(of: &storage) { buffer throws(Failure) in
            let name = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
            withUnsafeBytes(of: self.words) { bytes in
                for index in 0..<32 {
                    name[3 &+ 2 &* index] = Self.digit(bytes[index] &>> 4)
                    name[4 &+ 2 &* index] = Self.digit(bytes[index] & 0x0F)
                }
            }
            name[0] = name[3]
            name[1] = name[4]
            name[2] = UInt8(ascii: "/")
            return try body(UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self))
        }
    }

    /// The lowercase hexadecimal digit for `value` (0 to 15).
    private static func digit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") &+ value : UInt8(ascii: "a") &- 10 &+ value
    }

    package static func == (lhs: KeyDigest, rhs: KeyDigest) -> Bool {
        lhs.words == rhs.words
    }

    package func hash(into hasher: inout Hasher) {
        // The digest is already uniformly distributed: one word is enough.
        hasher.combine(self.words.0)
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
