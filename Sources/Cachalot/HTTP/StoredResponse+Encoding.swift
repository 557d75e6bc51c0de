import Foundation
import HTTPTypes

extension StoredResponse {
    /// The response in the binary form kept as a ``DiskCache`` entry's metadata.
    ///
    /// ```
    /// "CHR1"                      magic and version
    /// request time, response time Float64 bit patterns, seconds since 1970
    /// status code                 UInt16
    /// reason phrase               string
    /// field count, then fields    UInt32; name string, value string each
    /// vary count, then fields     UInt32; name string, then 0 (absent) or 1 and a value string
    /// ```
    ///
    /// Numbers are little-endian; a string is its UTF-8 length as a UInt32, then the bytes.
    public func encoded() -> Data {
        var writer = Writer()
        writer.bytes.append(contentsOf: Self.magic)
        writer.append(self.requestTime.timeIntervalSince1970.bitPattern)
        writer.append(self.responseTime.timeIntervalSince1970.bitPattern)
        writer.append(UInt16(clamping: self.response.status.code))
        writer.append(self.response.status.reasonPhrase)
        writer.append(UInt32(self.response.headerFields.count))
        for field in self.response.headerFields {
            writer.append(field.name.rawName)
            writer.append(field.value)
        }
        writer.append(UInt32(self.varyingFields.count))
        for field in self.varyingFields {
            writer.append(field.name)
            if let value = field.value {
                writer.bytes.append(1)
                writer.append(value)
            } else {
                writer.bytes.append(0)
            }
        }
        return Data(writer.bytes)
    }

    /// Reads a response written by ``encoded()``; `nil` if `data` is not one (damaged, or
    /// written by a later version).
    public init?(decoding data: Data) {
        var reader = Reader(bytes: [UInt8](data))
        guard reader.take(4).map(Array.init) == Self.magic,
            let requestTime = reader.number(UInt64.self).map({ Date(timeIntervalSince1970: Double(bitPattern: $0)) }),
            let responseTime = reader.number(UInt64.self).map({ Date(timeIntervalSince1970: Double(bitPattern: $0)) }),
            let code = reader.number(UInt16.self), (100...999).contains(code),
            let reason = reader.string(),
            let fieldCount = reader.number(UInt32.self)
        else { return nil }
        var fields = HTTPFields()
        for _ in 0..<fieldCount {
            guard let name = reader.string().flatMap({ HTTPField.Name($0) }), let value = reader.string() else {
                return nil
            }
            fields.append(HTTPField(name: name, value: value))
        }
        guard let varyCount = reader.number(UInt32.self) else { return nil }
        var varyingFields: [VaryingField] = []
        for _ in 0..<varyCount {
            guard let name = reader.string(), let flag = reader.take(1)?.first, flag <= 1 else { return nil }
            let value = flag == 1 ? reader.string() : nil
            guard flag == 0 || value != nil else { return nil }
            varyingFields.append(VaryingField(name: name, value: value))
        }
        guard reader.isAtEnd else { return nil }
        self.init(
            response: HTTPResponse(status: .init(code: Int(code), reasonPhrase: reason), headerFields: fields),
            requestTime: requestTime,
            responseTime: responseTime,
            varyingFields: varyingFields
        )
    }

    private static let magic: [UInt8] = Array("CHR1".utf8)

    private struct Writer {
        var bytes: [UInt8] = []

        mutating func append<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.littleEndian) { self.bytes.append(contentsOf: $0) }
        }

        mutating func append(_ string: String) {
            let utf8 = Array(string.utf8)
            self.append(UInt32(utf8.count))
            self.bytes.append(contentsOf: utf8)
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var position = 0

        var isAtEnd: Bool { self.position == self.bytes.count }

        mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard count >= 0, count <= self.bytes.count - self.position else { return nil }
            defer { self.position += count }
            return self.bytes[self.position..<self.position + count]
        }

        mutating func number<T: FixedWidthInteger>(_ type: T.Type) -> T? {
            guard let slice = self.take(MemoryLayout<T>.size) else { return nil }
            return slice.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(as: T.self)) }
        }

        mutating func string() -> String? {
            guard let count = self.number(UInt32.self), let slice = self.take(Int(count)) else { return nil }
            // Header text is nearly always ASCII, which is valid UTF-8 as it is: checking for
            // that costs a fraction of a general validation.
            if slice.allSatisfy({ $0 < 0x80 }) { return String(decoding: slice, as: UTF8.self) }
            return String(validating: slice, as: UTF8.self)
        }
    }
}
