import Synchronization

/// Identical reads in flight at once, made once: the first caller for a key reads, and callers
/// that come while it reads wait for its result instead of reading again. What the shared tiers
/// are asked goes through one, so that N identical misses make one database read, not N.
///
/// The first caller reads in its own task; nothing runs in the background. A waiting caller
/// waits for that read however long it takes, which the tier's own timeout bounds.
final class ReadFlights<Value: Sendable>: Sendable {
    /// What a caller is told when it arrives: to read, or what another caller read.
    private enum Outcome {
        case read
        case value(Value)
    }

    /// The callers waiting, by the key being read.
    private let waiting = Mutex<[String: [CheckedContinuation<Outcome, Never>]]>([:])

    /// The value `read` gives for `key`, read once for every caller that asks while it is read.
    func value(for key: String, read: () async -> Value) async -> Value {
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let isReader = self.waiting.withLock { waiting in
                if waiting[key] != nil {
                    waiting[key]?.append(continuation)
                    return false
                }
                waiting[key] = []
                return true
            }
            if isReader { continuation.resume(returning: .read) }
        }
        if case .value(let value) = outcome { return value }
        let value = await read()
        let waiters = self.waiting.withLock { $0.removeValue(forKey: key) } ?? []
        for waiter in waiters { waiter.resume(returning: .value(value)) }
        return value
    }

    /// How many callers wait for the read of `key`: for tests.
    func waiters(for key: String) -> Int {
        self.waiting.withLock { $0[key]?.count ?? 0 }
    }
}
