/// A fast 64-bit checksum that finds torn writes and flipped bits in entry headers and journal
/// records: FNV-1a's multiply-xor step over 8-byte words, then over the bytes left over. It is
/// not a defence against deliberate tampering, which a directory readable only by its owner
/// does not need.
struct Checksum {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        let prime: UInt64 = 0x0000_0100_0000_01B3
        var offset = 0
        while offset + 8 <= bytes.count {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            self.value = (self.value ^ word) &* prime
            self.value ^= self.value >> 29
            offset += 8
        }
        while offset < bytes.count {
            self.value = (self.value ^ UInt64(bytes[offset])) &* prime
            offset += 1
        }
        // Count the length in, so that moving bytes between parts changes the sum.
        self.value = (self.value ^ UInt64(bytes.count)) &* prime
    }

    static func of(_ parts: UnsafeRawBufferPointer...) -> UInt64 {
        var checksum = Checksum()
        for part in parts { checksum.update(part) }
        return checksum.value
    }
}
