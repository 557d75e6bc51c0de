import Testing

@testable import CachalotServer

@Suite("RequestLineMeter")
struct RequestLineMeterTests {
    @Test("a byte is a token byte exactly when RFC 9110 §5.6.2 makes it a tchar")
    func tokenBytes() {
        let tchars = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(RequestLineMeter.isTokenByte(byte) == tchars.contains(byte), "byte \(byte)")
        }
    }
}
