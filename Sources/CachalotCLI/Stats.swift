import ArgumentParser
import Cachalot
import CachalotPostgres
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

            With --shared (or CACHALOT_SHARED), it shows the shared tier too: its entries and size \
            over all its databases, and how many of this directory's loads that asked it it answered.
            """
    )

    @OptionGroup var options: GlobalOptions
    @OptionGroup var shared: SharedOptions

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
        var shared: Shared?

        /// The shared tier: its size, or why it could not be read, and how it served this
        /// directory's loads.
        struct Shared: Codable {
            var databases: [String]
            var entries: Int?
            var size: Int?
            var sizeLimit: Int
            var error: String?
            var lookups: Int
            var hits: Int
            var hitRatio: Double
        }
    }

    func validate() throws {
        try self.options.refuseSizeLimit(for: "\(Self.configuration.commandName ?? "")")
    }

    func run() async throws {
        try await Failure.reporting(quiet: self.options.quiet) {
            try await self.shared.withTier(quiet: self.options.quiet) { shared in try await self.show(shared: shared) }
        }
    }

    private func show(shared: PostgresCache?) async throws {
        let disk = try self.options.openCache()
        var report: Report
        do {
            report = try Self.report(disk)
        } catch {
            throw Failure(.cacheUnusable, "cannot read \(disk.directory.path): \(Failure.describe(error))")
        }
        if let shared { report.shared = await Self.report(shared, counts: report.statistics) }
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
                "\(report.hits) (\(percent(report.hitRatio))): "
                    + "\(Int.saturatingSum(counts.memoryHits, counts.diskHits, counts.sharedHits)) fresh, "
                    + "\(counts.notModified) revalidated (304), \(counts.staleAnswers) stale",
            ])
        }
        rows.append(["bytes saved", ByteCount.format(report.bytesSaved)])
        rows.append(["downloaded", ByteCount.format(report.bytesDownloaded)])
        if let shared = report.shared {
            rows.append(["shared", shared.databases.joined(separator: " ")])
            if let error = shared.error {
                rows.append(["shared size", "unknown: \(error)"])
            } else if let entries = shared.entries, let size = shared.size {
                rows.append(["shared entries", String(entries)])
                rows.append([
                    "shared size",
                    "\(ByteCount.format(size)) of \(ByteCount.format(shared.sizeLimit)) per database",
                ])
            }
            rows.append([
                "shared hits",
                "\(shared.hits) of \(shared.lookups) loads that asked it (\(percent(shared.hitRatio)))",
            ])
        }
        try OutputFile.standardOutput(Data(List.aligned(rows).utf8))
    }

    static func report(_ disk: DiskCache) throws -> Report {
        let entries = try disk.entries()
        let state = ToolState.read(from: disk.directory)
        let counts = state?.statistics ?? ResourceLoader.Statistics()
        // Counts come from a file that can say anything: sums stop at the largest number.
        let hits = Int.saturatingSum(
            counts.memoryHits,
            counts.diskHits,
            counts.sharedHits,
            counts.notModified,
            counts.staleAnswers
        )
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

    /// The shared tier's part of the report: its size read from its databases (or the error),
    /// and the hits kept in `counts`.
    static func report(_ shared: PostgresCache, counts: ResourceLoader.Statistics) async -> Report.Shared {
        var report = Report.Shared(
            databases: shared.configuration.databases.map(\.description),
            sizeLimit: shared.configuration.maximumSize,
            lookups: counts.sharedLookups,
            hits: counts.sharedHits,
            hitRatio: counts.sharedLookups == 0 ? 0 : Double(counts.sharedHits) / Double(counts.sharedLookups)
        )
        do {
            let usage = try await shared.usage()
            (report.entries, report.size) = (usage.entries, usage.bytes)
        } catch {
            report.error = error.message
        }
        return report
    }
}
