import ArgumentParser
import Cachalot
import Foundation

/// `cachalot stats`: how full the cache is, and how well it has served.
struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show the cache's size against its limit, and its hit ratio since it was first used.",
        discussion: """
            Examples:
              cachalot stats
              cachalot stats --json | jq .hitRatio

            Hits are loads answered from the cache: fresh from memory or disk, after a 304 \
            (Not Modified), or stale where allowed. Bytes saved are the body bytes those answers \
            did not download. The counts add up every cachalot run on this directory, and are \
            kept in it (cachalot.state).
            """
    )

    @OptionGroup var options: GlobalOptions

    @Flag(help: "Print a JSON object.")
    var json = false

    /// What `--json` prints.
    struct Report: Codable {
        var directory: String
        var entries: Int
        var size: Int
        var sizeLimit: Int
        var oldest: Date?
        var newest: Date?
        var since: Date?
        var requests: Int
        var hits: Int
        var hitRatio: Double
        var bytesSaved: Int
        var bytesDownloaded: Int
        var statistics: ResourceLoader.Statistics
    }

    func validate() throws {
        try self.options.refuseSizeLimit(for: "\(Self.configuration.commandName ?? "")")
    }

    func run() async throws {
        try await Failure.reporting(quiet: self.options.quiet) { try self.show() }
    }

    private func show() throws {
        let disk = try self.options.openCache()
        let report: Report
        do {
            report = try Self.report(disk)
        } catch {
            throw Failure(.cacheUnusable, "cannot read \(disk.directory.path): \(Failure.describe(error))")
        }
        if self.json {
            try GlobalOptions.printJSON(report)
            return
        }
        let now = Date()
        let when = { (date: Date?) in date.map { "\(formatSeconds(now.timeIntervalSince($0))) ago" } ?? "—" }
        let percent = { (part: Double) in "\((part * 1_000).rounded() / 10) %" }
        let counts = report.statistics
        var rows = [
            ["directory", report.directory],
            ["entries", String(report.entries)],
            [
                "size",
                "\(ByteCount.format(report.size)) of \(ByteCount.format(report.sizeLimit)) "
                    + "(\(percent(Double(report.size) / Double(max(1, report.sizeLimit)))))",
            ],
            ["oldest", when(report.oldest)],
            ["newest", when(report.newest)],
            ["counting since", when(report.since)],
            ["requests", String(report.requests)],
        ]
        if report.requests > 0 {
            rows.append([
                "hits",
                "\(report.hits) (\(percent(report.hitRatio))): \(Int.saturatingSum(counts.memoryHits, counts.diskHits)) fresh, "
                    + "\(counts.notModified) revalidated (304), \(counts.staleAnswers) stale",
            ])
        }
        rows.append(["bytes saved", ByteCount.format(report.bytesSaved)])
        rows.append(["downloaded", ByteCount.format(report.bytesDownloaded)])
        try OutputFile.standardOutput(Data(List.aligned(rows).utf8))
    }

    static func report(_ disk: DiskCache) throws -> Report {
        let entries = try disk.entries()
        let state = ToolState.read(from: disk.directory)
        let counts = state?.statistics ?? ResourceLoader.Statistics()
        // Counts come from a file that can say anything: sums stop at the largest number.
        let hits = Int.saturatingSum(counts.memoryHits, counts.diskHits, counts.notModified, counts.staleAnswers)
        return Report(
            directory: disk.directory.path,
            entries: entries.count,
            size: entries.reduce(0) { $0 + $1.size },
            sizeLimit: disk.configuration.sizeLimit,
            oldest: entries.map(\.created).min(),
            newest: entries.map(\.created).max(),
            since: state?.since,
            requests: counts.requests,
            hits: hits,
            hitRatio: counts.requests == 0 ? 0 : Double(hits) / Double(counts.requests),
            bytesSaved: counts.bytesFromCache,
            bytesDownloaded: counts.bytesFromNetwork,
            statistics: counts
        )
    }
}
