import Synchronization

@testable import Cachalot

/// Something background work holds, which notes, when it is let go, whether that work still
/// counted as pending. What a waiter for the work's end relies on being gone (a file held open,
/// say) must go before the work counts as ended.
final class ReleaseProbe: Sendable {
    /// What a probe noted when it was let go.
    final class Outcome: Sendable {
        fileprivate let state = Mutex<Bool?>(nil)

        /// Whether the work still counted as pending when the probe was let go; `nil` while the
        /// probe is held.
        var wasPendingAtRelease: Bool? {
            self.state.withLock { $0 }
        }
    }

    private let pending: PendingWork
    private let outcome: Outcome

    init(counting pending: PendingWork, noting outcome: Outcome) {
        self.pending = pending
        self.outcome = outcome
    }

    deinit {
        let isPending = !self.pending.isIdle
        self.outcome.state.withLock { $0 = isPending }
    }
}
