import Foundation
import HTTPTypes
import Synchronization

/// One answer from the origin that several identical streamed loads read: the first load of a
/// URL goes to the origin, and loads of it that arrive before the answer is whole wait for its
/// head and read its body from the start, as it arrives (collapsed forwarding, read while it is
/// being written).
///
/// Only a response that is being stored and has a `Content-Length` no larger than the largest
/// entry is shared. Any other answer goes to its own load alone, and the loads that waited send
/// their own requests.
///
/// The body is read from the origin at the origin's pace, whatever the readers' pace. What is
/// held in memory for them is bounded: once the body is being written to a file of the disk
/// tier as it arrives (past the loader's streaming threshold, see ``spool(_:)``), no more than
/// ``window`` bytes of it are held (none while the loader holds more than its budget of bodies), and a reader that fell behind reads the rest from that
/// file. A slow client thus costs a window of memory and a file it reads from, not its whole
/// body. Without such a file (a body under the threshold, or a disk tier that cannot stream),
/// the whole body is held until the last reader is done, which the threshold or the largest
/// entry bounds.
final class SharedResponse: Sendable {
    /// The most bytes of body held in memory once the body is also in a file.
    static let window = 2 << 20

    /// The response's head.
    let response: HTTPResponse
    /// The response as it is stored, for the `Vary` check of the loads that read it.
    let stored: StoredResponse
    /// The body's length.
    let length: Int

    /// The loader's budget of bodies held in memory, which counts the pieces held here.
    private let budget: ByteBudget

    init(response: HTTPResponse, stored: StoredResponse, length: Int, budget: ByteBudget) {
        self.response = response
        self.stored = stored
        self.length = length
        self.budget = budget
    }

    deinit {
        self.budget.give(self.state.withLock { $0.heldBytes })
    }

    private struct State {
        /// The pieces held, from the byte at `firstOffset` on; those before it are in `spool`.
        var pieces: [Data] = []
        var firstOffset = 0
        /// The number, from the body's first, of the first piece held.
        var firstPiece = 0
        var heldBytes = 0
        /// The file the body is written to as it arrives, if it is.
        var spool: BodySpool?
        /// Where the file's body ends, if writing it stopped (a full disk); `nil` while every
        /// piece appended is in it.
        var spooledEnd: Int?
        var end: Result<Void, any Error>?
        /// Loads waiting for a piece or the end, by a number of their own: all are woken by
        /// either, and one alone when its task is cancelled.
        var pieceWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var lastWaiter = 0

        /// Lets go of the oldest pieces while more than `limit` bytes are held and they are in
        /// the file; returns how many bytes it let go.
        mutating func trim(keeping limit: Int) -> Int {
            guard self.spool != nil else { return 0 }
            var count = 0
            var offset = self.firstOffset
            var held = self.heldBytes
            while held > limit, count < self.pieces.count {
                let size = self.pieces[count].count
                if let spooledEnd = self.spooledEnd, offset + size > spooledEnd { break }
                offset += size
                held -= size
                count += 1
            }
            guard count > 0 else { return 0 }
            self.pieces.removeFirst(count)
            self.firstOffset = offset
            self.firstPiece += count
            defer { self.heldBytes = held }
            return self.heldBytes - held
        }

        /// What a reader at `place` reads next.
        ///
        /// A reader in memory moves from piece to piece, so its next piece is the one after the
        /// last it read; one that comes back from the file arrives at the first piece held, since
        /// a read from the file stops where memory began.
        func next(at place: Place) -> Next {
            if place.offset < self.firstOffset, let spool = self.spool {
                return .spooled(spool, count: min(SharedResponse.spooledRead, self.firstOffset - place.offset))
            }
            let index = (place.offset == self.firstOffset ? self.firstPiece : place.piece) - self.firstPiece
            if index >= 0, index < self.pieces.count { return .piece(self.pieces[index], self.firstPiece + index) }
            if let end = self.end { return .end(end) }
            return .wait
        }
    }

    /// Where a reader is: the byte it reads next, and the number of the piece that begins there
    /// if it read the one before from memory.
    private struct Place {
        var offset = 0
        var piece = 0
    }

    /// What a reader does next.
    private enum Next {
        /// This piece, with its number.
        case piece(Data, Int)
        case spooled(BodySpool, count: Int)
        case end(Result<Void, any Error>)
        case wait
    }

    /// The most bytes read from the file at once.
    static let spooledRead = 256 << 10

    private let state = Mutex(State())

    /// Adds a piece of the body.
    func append(_ piece: Data) {
        self.budget.take(piece.count)
        let limit = self.limit
        var released = 0
        self.wake { state in
            state.pieces.append(piece)
            state.heldBytes += piece.count
            released = state.trim(keeping: limit)
        }
        self.budget.give(released)
    }

    /// The bytes of body in the file that may stay in memory: a window, none while the loader
    /// holds more than its budget of bodies.
    private var limit: Int {
        self.budget.isExceeded ? 0 : Self.window
    }

    /// The file the body is being written to from its start, holding every piece appended so far
    /// and each one appended after, until ``spoolStopped(at:)``.
    func spool(_ spool: BodySpool) {
        let limit = self.limit
        let released = self.state.withLock { state in
            state.spool = spool
            return state.trim(keeping: limit)
        }
        self.budget.give(released)
    }

    /// Writing the file stopped: it holds the body's first `length` bytes, no more.
    func spoolStopped(at length: Int) {
        self.state.withLock { state in
            if state.spooledEnd == nil { state.spooledEnd = length }
        }
    }

    /// How many bytes of body are held in memory: for tests.
    var heldBytes: Int {
        self.state.withLock { $0.heldBytes }
    }

    /// Ends the body: whole, or broken with `error`.
    func finish(_ result: Result<Void, any Error>) {
        self.wake { $0.end = result }
    }

    private func wake(_ change: (inout State) -> Void) {
        let waiters = self.state.withLock { state in
            change(&state)
            defer { state.pieceWaiters = [:] }
            return state.pieceWaiters
        }
        for waiter in waiters.values { waiter.resume() }
    }

    /// The body's next piece for a reader at `place`, waiting until it has arrived; `nil` after
    /// the last. `place` moves past what is returned.
    ///
    /// A reader whose task is cancelled stops at once, waiting or not: the body goes on arriving
    /// for the other readers and for the cache.
    ///
    /// - Throws: `CancellationError` when the reading task is cancelled; the error that broke the
    ///   body; or `LoadError` if the file a reader that fell behind reads from cannot be read.
    private func piece(at place: inout Place) async throws -> Data? {
        while true {
            try Task.checkCancellation()
            let offset = place.offset
            switch self.state.withLock({ $0.next(at: place) }) {
            case .piece(let piece, let number):
                place = Place(offset: offset + piece.count, piece: number + 1)
                return piece
            case .spooled(let spool, let count):
                let data: Data
                do {
                    data = try await withBlockingAllowed { () throws in try spool.read(at: offset, count: count) }
                } catch {
                    throw LoadError(
                        .storage,
                        "Reading a shared body back from its file failed: \(error)",
                        underlying: error
                    )
                }
                guard !data.isEmpty else {
                    throw LoadError(.storage, "A shared body's file ended before the body it held.")
                }
                place.offset += data.count
                return data
            case .end(let result):
                try result.get()
                return nil
            case .wait:
                let waiter = self.state.withLock { state in
                    state.lastWaiter += 1
                    return state.lastWaiter
                }
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        // Cancellation is marked before its handler runs, and both look under the
                        // lock: a waiter is either never added or removed by the handler.
                        let isReady = self.state.withLock { state in
                            let isReady =
                                offset < state.firstOffset + state.heldBytes || state.end != nil || Task.isCancelled
                            if !isReady { state.pieceWaiters[waiter] = continuation }
                            return isReady
                        }
                        if isReady { continuation.resume() }
                    }
                } onCancel: {
                    self.state.withLock { $0.pieceWaiters.removeValue(forKey: waiter) }?.resume()
                }
            }
        }
    }

    /// The body, read from its start.
    var body: HTTPBody {
        HTTPBody(Pieces(response: self)) { $0 }
    }

    private struct Pieces: AsyncSequence, Sendable {
        let response: SharedResponse

        func makeAsyncIterator() -> Iterator {
            Iterator(response: self.response)
        }

        struct Iterator: AsyncIteratorProtocol {
            let response: SharedResponse
            var place = Place()

            mutating func next() async throws -> Data? {
                try await self.response.piece(at: &self.place)
            }
        }
    }
}
