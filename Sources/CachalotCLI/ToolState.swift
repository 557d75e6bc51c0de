import Cachalot
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the tool keeps in the cache directory beside the cache, in `cachalot.json`: the size
/// limit set with `--max-size`, and what every run has done since the directory was first used,
/// for `cachalot stats`.
///
/// Runs at once each add their own counts: a change takes the lock file `cachalot.lock`, reads
/// the state again, and replaces the file whole (a temporary name, then a rename). A file that
/// cannot be read is started afresh.
struct ToolState: Codable {
    /// The size limit last given with `--max-size`, in bytes.
    var maximumSize: Int?
    /// When the tool first used the directory.
    var since: Date
    /// Every run's loads, added up.
    var statistics: ResourceLoader.Statistics

    init(since: Date) {
        self.since = since
        self.statistics = ResourceLoader.Statistics()
    }

    /// The state kept in `directory`, or `nil` if there is none that can be read.
    static func read(from directory: URL) -> ToolState? {
        guard let data = FileManager.default.contents(atPath: Self.path(in: directory)) else { return nil }
        return try? Self.decoder.decode(ToolState.self, from: data)
    }

    /// Changes the state kept in `directory` under its lock, making it if there is none.
    static func update(in directory: URL, _ change: (inout ToolState) -> Void) throws {
        let lock = open(directory.appending(path: "cachalot.lock").path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw OutputFile.WriteError(description: String(cString: strerror(errno))) }
        defer { close(lock) }
        while flock(lock, LOCK_EX) != 0 && errno == EINTR {}
        var state = Self.read(from: directory) ?? ToolState(since: Date())
        change(&state)
        try OutputFile.write(try Self.encoder.encode(state), to: Self.path(in: directory), mode: 0o600)
    }

    /// Adds a run's loads to the counts, ignoring a failure: the run itself succeeded.
    static func record(_ statistics: ResourceLoader.Statistics, in directory: URL) {
        guard statistics.requests > 0 else { return }
        try? Self.update(in: directory) { state in
            state.statistics.requests += statistics.requests
            state.statistics.memoryHits += statistics.memoryHits
            state.statistics.diskHits += statistics.diskHits
            state.statistics.misses += statistics.misses
            state.statistics.revalidations += statistics.revalidations
            state.statistics.notModified += statistics.notModified
            state.statistics.staleAnswers += statistics.staleAnswers
            state.statistics.bytesFromNetwork += statistics.bytesFromNetwork
            state.statistics.bytesFromCache += statistics.bytesFromCache
        }
    }

    private static func path(in directory: URL) -> String {
        directory.appending(path: "cachalot.json").path
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return encoder
    }()

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()
}
