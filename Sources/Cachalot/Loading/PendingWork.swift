import Synchronization

/// Counts work not yet done, and lets tasks wait until there is none.
package final class PendingWork: Sendable {
    private let state = Mutex<(count: Int, waiters: [CheckedContinuation<Void, Never>])>((0, []))

    package init() {}

    package func begin() {
        self.state.withLock { $0.count += 1 }
    }

    package func end() {
        let waiters = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.count -= 1
            guard state.count == 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Whether no work is counted now: for tests.
    package var isIdle: Bool {
        self.state.withLock { $0.count == 0 }
    }

    package func waitUntilIdle() async {
        await withCheckedContinuation { continuation in
            let isIdle = self.state.withLock { state in
                if state.count > 0 { state.waiters.append(continuation) }
                return state.count == 0
            }
            if isIdle { continuation.resume() }
        }
    }
}
