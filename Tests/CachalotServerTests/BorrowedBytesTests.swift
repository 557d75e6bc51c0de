import Foundation
import NIOCore
import Synchronization
import Testing

@testable import CachalotServer

@Suite("Bodies written from their own bytes")
struct BorrowedBytesTests {
    /// `count` bytes in memory that `malloc` gave, which set `freed` when their `Data` lets go.
    private static func body(count: Int, freed: Freed) -> Data {
        let start = malloc(count)!
        for index in 0..<count {
            start.storeBytes(of: UInt8(truncatingIfNeeded: index &* 7), toByteOffset: index, as: UInt8.self)
        }
        return Data(
            bytesNoCopy: start,
            count: count,
            deallocator: .custom { start, _ in
                free(start)
                freed.set()
            }
        )
    }

    private final class Freed: Sendable {
        private let state = Mutex(false)
        func set() { self.state.withLock { $0 = true } }
        var isSet: Bool { self.state.withLock { $0 } }
    }

    private static func expected(_ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    }

    @Test(
        "A buffer over a body's bytes keeps them after the body's last other holder goes, and lets go with its last copy"
    )
    func lifetime() {
        let freed = Freed()
        var buffer: ByteBuffer? = ByteBuffer(borrowing: Self.body(count: 32_000, freed: freed))
        #expect(!freed.isSet)
        #expect(buffer.map { Array($0.readableBytesView) } == Self.expected(32_000))
        var slice: ByteBuffer? = buffer?.getSlice(at: 31_990, length: 10)
        buffer = nil
        #expect(!freed.isSet)
        #expect(slice.map { Array($0.readableBytesView) } == Array(Self.expected(32_000)[31_990...]))
        slice = nil
        #expect(freed.isSet)
    }

    @Test("Each buffer over the same bytes holds them; a slice of a body starts where the slice does")
    func holders() {
        let freed = Freed()
        let body = Self.body(count: 100_000, freed: freed)
        var first: ByteBuffer? = ByteBuffer(borrowing: body)
        var second: ByteBuffer? = ByteBuffer(borrowing: body)
        #expect(BorrowedBytes.holders(of: body) == 2)
        let middle = body[50_000..<60_000]
        var third: ByteBuffer? = ByteBuffer(borrowing: middle)
        #expect(BorrowedBytes.holders(of: middle) == 1)
        #expect(third.map { Array($0.readableBytesView) } == Array(Self.expected(100_000)[50_000..<60_000]))
        first = nil
        #expect(BorrowedBytes.holders(of: body) == 1)
        second = nil
        third = nil
        #expect(BorrowedBytes.holders(of: body) == 0)
        #expect(BorrowedBytes.holders(of: middle) == 0)
        _ = (first, second, third)
        #expect(!freed.isSet)
    }

    @Test("Writing past a borrowed buffer's end copies it first: the body is unchanged and the loan ends")
    func writeCopies() {
        let freed = Freed()
        let body = Self.body(count: 8_192, freed: freed)
        var buffer = ByteBuffer(borrowing: body)
        #expect(BorrowedBytes.holders(of: body) == 1)
        buffer.writeBytes([1, 2, 3])
        #expect(BorrowedBytes.holders(of: body) == 0)
        #expect(Array(buffer.readableBytesView) == Self.expected(8_192) + [1, 2, 3])
        #expect(Array(body) == Self.expected(8_192))
    }

    @Test("A body under the smallest borrowed size is copied", arguments: [0, 1, ByteBuffer.smallestBorrowedBody - 1])
    func smallCopied(count: Int) {
        let body = Data(Self.expected(count))
        let buffer = ByteBuffer(borrowing: body)
        #expect(BorrowedBytes.holders(of: body) == 0)
        #expect(Array(buffer.readableBytesView) == Self.expected(count))
    }
}
