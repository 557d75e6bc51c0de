import Foundation
import HTTPTypes
import Synchronization
import Testing

@testable import Cachalot

@Suite("HostLimiter and a response's announced length", .timeLimit(.minutes(1)))
struct HostLimiterTests {
    /// The tickets that took a slot, in order.
    final class Order: Sendable {
        private let taken = Mutex<[Int]>([])

        func append(_ ticket: Int) {
            self.taken.withLock { $0.append(ticket) }
        }

        var all: [Int] {
            self.taken.withLock { $0 }
        }
    }

    @Test("free slots are taken at once, up to the limit per host; the next waits for a release, by priority")
    func limitsPerHost() async throws {
        let limiter = HostLimiter(limit: 2)
        try await limiter.acquire("a", ticket: 1, priority: 0)
        try await limiter.acquire("a", ticket: 2, priority: 0)
        // Another host has slots of its own.
        try await limiter.acquire("b", ticket: 3, priority: 0)
        let order = Order()
        let low = Task {
            try await limiter.acquire("a", ticket: 4, priority: 0)
            order.append(4)
        }
        while limiter.waiting(for: "a") < 1 { await Task.yield() }
        let high = Task {
            try await limiter.acquire("a", ticket: 5, priority: 10)
            order.append(5)
        }
        while limiter.waiting(for: "a") < 2 { await Task.yield() }
        #expect(order.all.isEmpty)
        limiter.release("a")
        try await high.value
        #expect(order.all == [5])
        limiter.release("a")
        try await low.value
        #expect(order.all == [5, 4])
    }

    @Test("a cancelled task takes no slot, free or not")
    func cancelled() async throws {
        let limiter = HostLimiter(limit: 1)
        for isFree in [true, false] {
            if !isFree { try await limiter.acquire("a", ticket: 1, priority: 0) }
            let waiting = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                try await limiter.acquire("a", ticket: 2, priority: 0)
            }
            await #expect(throws: CancellationError.self) { try await waiting.value }
        }
        // The one slot is the first caller's: given back, it is free again.
        limiter.release("a")
        try await limiter.acquire("a", ticket: 3, priority: 0)
    }

    @Test("a response's length is its one Content-Length; none for two fields, a HEAD, a 204 or a 304")
    func announcedLength() {
        let get = HTTPRequest(method: .get, scheme: "http", authority: "a", path: "/")
        func length(_ values: [String], status: Int = 200, to request: HTTPRequest = get) -> Int? {
            var response = HTTPResponse(status: .init(code: status))
            for value in values { response.headerFields.append(HTTPField(name: .contentLength, value: value)) }
            return ResourceLoader.announcedLength(of: response, to: request)
        }
        #expect(length(["42"]) == 42)
        #expect(length(["0"]) == 0)
        #expect(length([]) == nil)
        #expect(length(["42", "42"]) == nil)
        #expect(length(["-1"]) == nil)
        #expect(length(["4x"]) == nil)
        #expect(length(["42"], status: 204) == nil)
        #expect(length(["42"], status: 304) == nil)
        #expect(length(["42"], to: HTTPRequest(method: .head, scheme: "http", authority: "a", path: "/")) == nil)
    }
}
