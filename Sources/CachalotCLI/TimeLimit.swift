/// `--max-time`: a bound on a whole command's work, as curl's `--max-time` bounds a transfer.
enum TimeLimit {
    /// Runs `work`, cancelling it once `seconds` have passed (no limit when `nil`): it then
    /// stops as an interruption does, keeping nothing partial, and this throws.
    ///
    /// - Throws: ``Failure`` with ``Failure/Status/network`` when the time ran out; else what
    ///   `work` throws.
    static func run(_ seconds: Double?, _ work: @escaping @Sendable () async throws -> Void) async throws {
        guard let seconds else { return try await work() }
        let finished = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await work()
                return true
            }
            group.addTask {
                try await Task.sleep(for: .milliseconds(Int64(seconds * 1_000)))
                return false
            }
            defer { group.cancelAll() }
            return try await group.next() ?? false
        }
        guard finished else {
            throw Failure(.network, "the transfer took longer than --max-time \(seconds) s; nothing partial was kept")
        }
    }
}
