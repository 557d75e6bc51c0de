import Foundation
import HTTPTypes
import Synchronization

/// One answer from the origin that several identical streamed loads read: the first load of a
/// URL goes to the origin, and loads of it that arrive before the answer is whole wait for its
/// head and read its body from the start, as it arrives (collapsed forwarding, read while it is
/// being written).
///
/// Only a response that is being stored and has a `Content-Length` no larger than the largest
/// entry is shared: its body is then held here until the last reader is done, which the entry
/// size bounds. Any other answer goes to its own load alone, and the loads that waited send
/// their own requests.
final class SharedResponse: Sendable {
    /// What the loads that followed are told once the origin's head has arrived.
    enum Head: Sendable {
        /// An answer made whole (a 304 that freshened the stored response, a stale answer to an
        /// origin error): each follower gets it as it is.
        case whole(Resource)
        /// A response whose body is read from here; followers whose request it matches (by its
        /// `Vary`) read it.
        case shared(HTTPResponse, StoredResponse, length: Int)
        /// Nothing to share: the followers send their own requests.
        case unshared
        /// The request failed: followers fail the same way (a cancelled leader is `unshared`).
        case failed(any Error)
    }

    private struct State {
        var head: Head?
        var pieces: [Data] = []
        var end: Result<Void, any Error>?
        var headWaiters: [CheckedContinuation<Head, Never>] = []
        /// Loads waiting for a piece or the end, by a number of their own: all are woken by
        /// either, and one alone when its task is cancelled.
        var pieceWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var lastWaiter = 0
    }

    private let state = Mutex(State())

    /// The head, once the leading load has published it.
    func head() async -> Head {
        await withCheckedContinuation { continuation in
            let head = self.state.withLock { state in
                if state.head == nil { state.headWaiters.append(continuation) }
                return state.head
            }
            if let head { continuation.resume(returning: head) }
        }
    }

    /// How many loads wait for the head: for tests.
    var waitingForHead: Int {
        self.state.withLock { $0.headWaiters.count }
    }

    /// Tells every load waiting for the head what it is.
    func publish(_ head: Head) {
        let waiters = self.state.withLock { state in
            state.head = head
            defer { state.headWaiters = [] }
            return state.headWaiters
        }
        for waiter in waiters { waiter.resume(returning: head) }
    }

    /// Adds a piece of the body.
    func append(_ piece: Data) {
        self.wake { $0.pieces.append(piece) }
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

    /// The body's piece `index`, waiting until it has arrived; `nil` after the last.
    ///
    /// A reader whose task is cancelled stops at once, waiting or not: the body goes on arriving
    /// for the other readers and for the cache.
    ///
    /// - Throws: `CancellationError` when the reading task is cancelled; else the error that
    ///   broke the body.
    func piece(at index: Int) async throws -> Data? {
        while true {
            try Task.checkCancellation()
            enum Next {
                case piece(Data)
                case end(Result<Void, any Error>)
                case wait
            }
            let next: Next = self.state.withLock { state in
                if index < state.pieces.count { return .piece(state.pieces[index]) }
                if let end = state.end { return .end(end) }
                return .wait
            }
            switch next {
            case .piece(let piece):
                return piece
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
                            let isReady = index < state.pieces.count || state.end != nil || Task.isCancelled
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

    /// The body, read from the first piece.
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
            var index = 0

            mutating func next() async throws -> Data? {
                let piece = try await self.response.piece(at: self.index)
                self.index += 1
                return piece
            }
        }
    }
}

/// The shared responses in flight, by what identifies identical requests.
final class SharedResponses: Sendable {
    private let flights = Mutex<[String: SharedResponse]>([:])

    /// The response in flight for `key`, and whether the caller leads it (it must publish its
    /// head, and `end` it).
    func join(_ key: String) -> (response: SharedResponse, isLeader: Bool) {
        self.flights.withLock { flights in
            if let response = flights[key] { return (response, false) }
            let response = SharedResponse()
            flights[key] = response
            return (response, true)
        }
    }

    /// The response in flight for `key`, if any: for tests.
    func inFlight(_ key: String) -> SharedResponse? {
        self.flights.withLock { $0[key] }
    }

    /// Takes `response` out of flight: later loads send their own requests (or find it stored).
    func end(_ key: String, _ response: SharedResponse) {
        self.flights.withLock { flights in
            if flights[key] === response { flights[key] = nil }
        }
    }
}
