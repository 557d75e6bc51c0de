/// Writes bytes into memory that has room for them, counted beforehand: a field's value or a
/// head written in one go, where each write to a `ByteBuffer` or a `String` would check its room
/// and its ownership again. For the modules of this package that write HTTP (the server's heads
/// and log lines, the origin's requests); inlinable, so that a head's many small writes are not
/// calls into this module.
package struct ByteWriter {
    package let buffer: UnsafeMutableRawBufferPointer
    /// The bytes written so far.
    @inlinable package var count: Int { self.written }
    @usableFromInline var written: Int

    @inlinable
    package init(_ buffer: UnsafeMutableRawBufferPointer) {
        self.buffer = buffer
        self.written = 0
    }

    @inlinable
    package init(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        self.init(UnsafeMutableRawBufferPointer(buffer))
    }

    @inlinable
    package mutating func write(_ text: StaticString) {
        text.withUTF8Buffer { self.write(UnsafeRawBufferPointer($0)) }
    }

    @inlinable
    package mutating func write(_ text: String) {
        // A native string's bytes in place, without a copy of the string to make them so.
        let wrote: Void? = text.utf8.withContiguousStorageIfAvailable { self.write(UnsafeRawBufferPointer($0)) }
        guard wrote == nil else { return }
        var text = text
        text.withUTF8 { self.write(UnsafeRawBufferPointer($0)) }
    }

    @inlinable
    package mutating func write(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, let target = self.buffer.baseAddress else { return }
        precondition(bytes.count <= self.buffer.count - self.count, "more bytes than were counted")
        (target + self.count).copyMemory(from: source, byteCount: bytes.count)
        self.written += bytes.count
    }

    /// One byte.
    @inlinable
    package mutating func write(byte: UInt8) {
        precondition(self.count < self.buffer.count, "more bytes than were counted")
        self.buffer[self.count] = byte
        self.written += 1
    }

    /// `value` in decimal digits, at least `digits` of them (zeros before), with a `-` if it is
    /// negative.
    @inlinable
    package mutating func write(decimal value: Int, digits: Int = 1) {
        if value < 0 { self.write(byte: UInt8(ascii: "-")) }
        let length = max(digits, Self.decimalLength(value.magnitude))
        precondition(length <= self.buffer.count - self.count, "more bytes than were counted")
        var rest = value.magnitude
        for index in (self.count..<self.count + length).reversed() {
            self.buffer[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
        self.written += length
    }

    /// The digits, and the `-` if it is negative, that ``write(decimal:digits:)`` writes for
    /// `value` with one digit at least.
    @inlinable
    package static func decimalLength(_ value: Int) -> Int {
        (value < 0 ? 1 : 0) + Self.decimalLength(value.magnitude)
    }

    /// The digits of `value` in decimal.
    @inlinable
    static func decimalLength(_ value: UInt) -> Int {
        var length = 1
        var rest = value / 10
        while rest > 0 {
            length += 1
            rest /= 10
        }
        return length
    }

    /// A field line, `name: value\r\n`.
    @inlinable
    package mutating func writeField(_ name: String, _ value: String) {
        self.write(name)
        self.write(": ")
        self.write(value)
        self.write("\r\n")
    }

    /// The bytes ``writeField(_:_:)`` writes.
    @inlinable
    package static func fieldLength(_ name: String, _ value: String) -> Int {
        name.utf8.count + value.utf8.count + 4
    }
}
