/// FNV-1a, 64 bits: a fast checksum that finds torn writes and flipped bits in headers and
/// journal records. It is not a defence against deliberate tampering, which a cache directory
/// readable only by its owner does not need.
struct Checksum {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes {
            self.value = (self.value ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
    }

    static func of(_ parts: UnsafeRawBufferPointer...) -> UInt64 {
        var checksum = Checksum()
        for part in parts { checksum.update(part) }
        return checksum.value
    }
}
