import Foundation
@_spi(CustomByteBufferAllocator) import NIOCore
import Synchronization

/// Bodies written to the socket from the memory they are kept in, rather than from a copy.
///
/// NIO writes `ByteBuffer`s only, and its public API makes one over a `Data`'s bytes only by
/// copying them: during 1 MB memory hits, that copy was 14 % of the proxy's CPU
/// (docs/performance.md). NIO's allocator interface can do without: a buffer made with
/// ``ByteBuffer/init(borrowing:)`` takes the `Data`'s bytes as its storage, with ``allocator``,
/// whose `deallocate` gives the bytes back when the last copy of the buffer is freed. Its C
/// functions get nothing but an address, so the `Data`s lent out are kept here, by the address
/// of their bytes, until then.
///
/// A buffer over lent bytes must not be written into: the bytes are the cache's own, shared
/// with every other reader. Nothing in the server writes into a body's buffer once it is made;
/// a write that needs more room than the buffer has is safe all the same, since it goes through
/// ``allocator``'s `reallocate`, which copies the bytes out and gives the loan back.
///
/// The kernel reads lent bytes when the event loop writes them: they must be in memory, not
/// a mapped file's pages that a read could wait for. The server lends bodies of at most
/// ``ProxyResponder/largestImmediateBody``, which the disk tier never maps.
enum BorrowedBytes {
    /// A `Data` lent to buffers, and how many hold it.
    private struct Loan {
        let owner: Data
        var holders: Int
    }

    private static let loans = Mutex<[UInt: Loan]>([:])

    /// The allocator of buffers over lent bytes; for memory of its own it is `malloc`'s.
    static let allocator = ByteBufferAllocator(
        allocate: { size in malloc(size) },
        reallocate: { address, oldSize, newSize in
            guard let address, BorrowedBytes.isLent(address) else { return realloc(address, newSize) }
            guard let copy = malloc(newSize) else { return nil }
            memcpy(copy, address, min(oldSize, newSize))
            _ = BorrowedBytes.giveBack(address)
            return copy
        },
        deallocate: { address in
            if !BorrowedBytes.giveBack(address) { free(address) }
        },
        copy: { destination, source, count in _ = memmove(destination, source, count) }
    )

    /// How many buffers hold `data`'s bytes: for tests.
    static func holders(of data: Data) -> Int {
        guard let address = data.withUnsafeBytes({ $0.baseAddress }) else { return 0 }
        return Self.loans.withLock { $0[UInt(bitPattern: address)]?.holders ?? 0 }
    }

    /// Keeps `data`, whose bytes start at `address`, until a buffer over them is freed.
    fileprivate static func lend(_ data: Data, at address: UnsafeRawPointer) {
        Self.loans.withLock { loans in
            loans[UInt(bitPattern: address), default: Loan(owner: data, holders: 0)].holders += 1
        }
    }

    private static func isLent(_ address: UnsafeMutableRawPointer) -> Bool {
        Self.loans.withLock { $0[UInt(bitPattern: address)] != nil }
    }

    /// Ends one buffer's loan of the bytes at `address`; `false` if none was lent there (the
    /// memory is then `malloc`'s).
    private static func giveBack(_ address: UnsafeMutableRawPointer) -> Bool {
        let key = UInt(bitPattern: address)
        let (wasLent, lastOwner) = Self.loans.withLock { loans -> (Bool, Data?) in
            guard var loan = loans[key] else { return (false, nil) }
            loan.holders -= 1
            if loan.holders > 0 {
                loans[key] = loan
                return (true, nil)
            }
            loans[key] = nil
            return (true, loan.owner)
        }
        // The last reference to the `Data` may be this one: it goes here, after the lock, so
        // that its deallocator (`free`, `munmap`) runs outside it.
        _ = lastOwner
        return wasLent
    }
}

extension ByteBuffer {
    /// The smallest body written from its own bytes (``init(borrowing:)``): a smaller one is
    /// copied, which costs less than a loan.
    static let smallestBorrowedBody = 4 << 10

    /// A buffer over `bytes`' own memory, which it keeps until the buffer and every copy of it
    /// are freed (see ``BorrowedBytes``); a copy for bodies under ``smallestBorrowedBody``.
    init(borrowing bytes: Data) {
        // A Data of this size keeps its bytes out of line, where they stay while it lives.
        guard bytes.count >= Self.smallestBorrowedBody, bytes.count < Int(UInt32.max),
            let address = bytes.withUnsafeBytes({ $0.baseAddress })
        else {
            self.init(bytes: bytes)
            return
        }
        let start = UnsafeMutableRawPointer(mutating: address)
        BorrowedBytes.lend(bytes, at: start)
        self.init(
            takingOwnershipOf: UnsafeMutableRawBufferPointer(start: start, count: bytes.count),
            allocator: BorrowedBytes.allocator
        )
    }
}
