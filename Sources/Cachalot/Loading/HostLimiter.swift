import Synchronization

/// Limits the network requests in flight to each host; the rest wait in order of priority,
/// then of arrival.
///
/// Only network requests pass through the loader's: an answer from memory or disk never waits
/// there. CachalotImages limits decoding with one, under a single key.
package final class HostLimiter: Sendable {
    private struct Waiter {
        var ticket: Int
        var priority: Int
        var arrival: Int
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Host {
        var running = 0
        var waiters: [Waiter] = []
    }

    private struct State {
        var hosts: [String: Host] = [:]
        var arrivals = 0

        /// Takes a slot of `host` if one of its `limit` is free.
        mutating func takeSlot(of host: String, limit: Int) -> Bool {
            guard self.hosts[host, default: Host()].running < limit else { return false }
            self.hosts[host, default: Host()].running += 1
            return true
        }
    }

    /// The most requests in flight to one host.
    let limit: Int
    private let state = Mutex(State())

    package init(limit: Int) {
        self.limit = limit
    }

    /// Waits for a free slot for `host`, then takes it; the caller must ``release(_:)`` it.
    ///
    /// - Parameters:
    ///   - ticket: Identifies the wait, for ``setPriority(_:of:)``; unique per wait.
    ///   - priority: Higher goes first.
    /// - Throws: `CancellationError` if the task is cancelled while it waits.
    package func acquire(_ host: String, ticket: Int, priority: Int) async throws {
        try Task.checkCancellation()
        // A free slot is taken without suspending: a wait that is resumed at once still
        // suspends its task and runs it again as a job of its executor, once per request.
        if self.state.withLock({ $0.takeSlot(of: host, limit: self.limit) }) { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = self.state.withLock { state -> Result<Bool, CancellationError> in
                    // Cancelled before it could wait: the cancellation handler found nothing to remove.
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.takeSlot(of: host, limit: self.limit) { return .success(true) }
                    state.arrivals += 1
                    state.hosts[host, default: Host()].waiters.append(
                        Waiter(ticket: ticket, priority: priority, arrival: state.arrivals, continuation: continuation)
                    )
                    return .success(false)
                }
                switch outcome {
                case .success(true): continuation.resume()
                case .success(false): break
                case .failure(let error): continuation.resume(throwing: error)
                }
            }
        } onCancel: {
            let waiter = self.state.withLock { state -> Waiter? in
                guard let index = state.hosts[host]?.waiters.firstIndex(where: { $0.ticket == ticket }) else {
                    return nil
                }
                return state.hosts[host]?.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Gives back a slot of `host`, to the most urgent waiter if there is one.
    package func release(_ host: String) {
        let next = self.state.withLock { state -> Waiter? in
            guard var entry = state.hosts[host] else { return nil }
            guard let index = entry.waiters.indices.max(by: { Self.isBefore(entry.waiters[$1], entry.waiters[$0]) })
            else {
                entry.running -= 1
                state.hosts[host] = entry.running == 0 ? nil : entry
                return nil
            }
            let waiter = entry.waiters.remove(at: index)
            state.hosts[host] = entry
            return waiter
        }
        next?.continuation.resume()
    }

    /// Changes the priority of a waiting request; does nothing if it is not waiting.
    func setPriority(_ priority: Int, of ticket: Int) {
        self.state.withLock { state in
            for (host, entry) in state.hosts {
                guard let index = entry.waiters.firstIndex(where: { $0.ticket == ticket }) else { continue }
                state.hosts[host]?.waiters[index].priority = priority
                return
            }
        }
    }

    /// The number of requests waiting for `host`.
    func waiting(for host: String) -> Int {
        self.state.withLock { $0.hosts[host]?.waiters.count ?? 0 }
    }

    /// Whether `first` goes before `second`: higher priority, then earlier arrival.
    private static func isBefore(_ first: Waiter, _ second: Waiter) -> Bool {
        first.priority != second.priority ? first.priority > second.priority : first.arrival < second.arrival
    }
}
