import Synchronization

/// Counts invalidations and purges, so that a read of a shared tier that overlapped one is not
/// used: it may have found what the removal was removing, and would bring it back into memory
/// and onto disk.
final class Removals: Sendable {
    /// Bumped as each removal begins and ends; and how many are under way.
    private let state = Mutex((epoch: 0, running: 0))

    /// The epoch now, for ``isUnchanged(since:)``.
    var epoch: Int {
        self.state.withLock { $0.epoch }
    }

    /// Whether no removal began or ended since `epoch`, and none is under way.
    func isUnchanged(since epoch: Int) -> Bool {
        self.state.withLock { $0.epoch == epoch && $0.running == 0 }
    }

    /// Runs `removal`, counted from its beginning to its end.
    func run<Result, Failure: Error>(
        _ removal: () async throws(Failure) -> Result
    ) async throws(Failure) -> Result {
        self.state.withLock { state in
            state.epoch += 1
            state.running += 1
        }
        defer {
            self.state.withLock { state in
                state.epoch += 1
                state.running -= 1
            }
        }
        return try await removal()
    }
}
