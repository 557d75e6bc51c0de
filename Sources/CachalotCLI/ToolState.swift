import Cachalot
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the tool keeps in the cache directory beside the cache, in `cachalot.state`: the size
/// limit set with `--max-size`, and what every run has done since the directory was first used,
/// for `cachalot stats`.
///
/// The file is lines of a name and a whole number, read without a decoder because every run
/// reads it: decoding JSON was a tenth of a cached `cachalot get`'s time in a profile here.
///
/// ```
/// maximumSize 500000000
/// since 1795297489
/// requests 14
/// diskHits 6
/// ```
///
/// Runs at once each add their own counts: a change takes the lock file `cachalot.lock`, reads
/// the state again, and replaces the file whole (a temporary name, then a rename). Unknown or
/// malformed lines are skipped; a file that cannot be read is started afresh.
struct ToolState {
    /// The size limit last given with `--max-size`, in bytes.
    var maximumSize: Int?
    /// When the tool first used the directory.
    var since: Date
    /// Every run's loads, added up.
    var statistics = ResourceLoader.Statistics()

    /// The counts, by their names in the file.
    private static var counts: [(String, WritableKeyPath<ResourceLoader.Statistics, Int>)] {
        [
            ("requests", \.requests), ("memoryHits", \.memoryHits), ("diskHits", \.diskHits), ("misses", \.misses),
            ("revalidations", \.revalidations), ("notModified", \.notModified), ("staleAnswers", \.staleAnswers),
            ("bytesFromNetwork", \.bytesFromNetwork), ("bytesFromCache", \.bytesFromCache),
            ("sharedHits", \.sharedHits), ("sharedLookups", \.sharedLookups),
        ]
    }

    init(since: Date) {
        self.since = since
    }

    /// The state kept in `directory`, or `nil` if there is none that can be read.
    static func read(from directory: URL) -> ToolState? {
        guard let data = Self.contents(of: Self.path(in: directory)) else { return nil }
        var values: [Substring: Int] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2, let value = Int(parts[1]) { values[parts[0]] = value }
        }
        // Values no run writes (a date before 1970 or after 9999, a size or count below zero)
        // mean the file was damaged: the counts start afresh, and a bad value is left out; the
        // size limit, the user's own choice, is kept if it is whole.
        let maximumSize = values["maximumSize"].flatMap { $0 > 0 ? $0 : nil }
        guard let since = values["since"], (0...253_402_300_799).contains(since) else {
            guard let maximumSize else { return nil }
            var state = ToolState(since: Date())
            state.maximumSize = maximumSize
            return state
        }
        var state = ToolState(since: Date(timeIntervalSince1970: TimeInterval(since)))
        state.maximumSize = maximumSize
        for (name, count) in Self.counts { state.statistics[keyPath: count] = max(0, values[Substring(name)] ?? 0) }
        return state
    }

    /// The bytes of the regular file at `path`, if it is one of at most 64 KiB. A link, a FIFO
    /// or a device in its place is neither followed nor read: it could block, or never end.
    private static func contents(of path: String) -> Data? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_size <= 65_536 else {
            return nil
        }
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
        #if canImport(Glibc)
        let count = Glibc.read(descriptor, &bytes, bytes.count)
        #else
        let count = Darwin.read(descriptor, &bytes, bytes.count)
        #endif
        return count >= 0 ? Data(bytes[0..<count]) : nil
    }

    /// The file's text.
    private var text: String {
        var lines = ["since \(Int(self.since.timeIntervalSince1970))"]
        if let size = self.maximumSize { lines.append("maximumSize \(size)") }
        for (name, count) in Self.counts { lines.append("\(name) \(self.statistics[keyPath: count])") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Changes the state kept in `directory` under its lock, making it if there is none.
    static func update(in directory: URL, _ change: (inout ToolState) -> Void) throws {
        let lock = open(
            directory.appending(path: "cachalot.lock").path,
            O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
            0o600
        )
        guard lock >= 0 else { throw OutputFile.WriteError(description: String(cString: strerror(errno))) }
        defer { close(lock) }
        while flock(lock, LOCK_EX) != 0 && errno == EINTR {}
        var state = Self.read(from: directory) ?? ToolState(since: Date())
        change(&state)
        try OutputFile.write(Data(state.text.utf8), to: Self.path(in: directory), mode: 0o600, replacing: true)
    }

    /// Adds a run's loads to the counts, ignoring a failure: the run itself succeeded.
    static func record(_ statistics: ResourceLoader.Statistics, in directory: URL) {
        guard statistics.requests > 0 else { return }
        try? Self.update(in: directory) { state in
            for (_, count) in Self.counts {
                // The file can say anything: a count at its largest stays there.
                let (sum, overflow) = state.statistics[keyPath: count].addingReportingOverflow(
                    statistics[keyPath: count]
                )
                state.statistics[keyPath: count] = overflow ? .max : sum
            }
        }
    }

    private static func path(in directory: URL) -> String {
        directory.appending(path: "cachalot.state").path
    }
}
