import ArgumentParser
import Cachalot
import Foundation

/// `cachalot purge`, `trim` and `clear`: each removes entries and says what it removed.
enum Maintenance {
    /// Runs `removal` on the cache and reports the entries and bytes it took away.
    static func remove(
        _ options: GlobalOptions,
        _ what: String,
        _ removal: (DiskCache) throws(CacheError) -> Void
    ) async throws {
        try await Failure.reporting(quiet: options.quiet) { try Self.removing(options, what, removal) }
    }

    private static func removing(
        _ options: GlobalOptions,
        _ what: String,
        _ removal: (DiskCache) throws(CacheError) -> Void
    ) throws {
        let disk = try options.openCache()
        let line: String
        do {
            let (countBefore, sizeBefore) = (try disk.count, try disk.totalSize)
            try removal(disk)
            let (count, size) = (try disk.count, try disk.totalSize)
            line =
                "removed \(countBefore - count) entries (\(ByteCount.format(sizeBefore - size)))\(what.isEmpty ? "" : " " + what); "
                + "\(count) left (\(ByteCount.format(size)))\n"
        } catch {
            throw Failure(.cacheUnusable, "cannot change \(disk.directory.path): \(Failure.describe(error))")
        }
        if !options.quiet { try OutputFile.standardOutput(Data(line.utf8)) }
    }
}

/// `cachalot purge --older-than DURATION`.
struct Purge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Remove the entries stored longer ago than a duration.",
        discussion: """
            Examples:
              cachalot purge --older-than 7d
              cachalot purge --older-than 1d12h

            Durations are a number and a unit: s, m, h, d or w, several together if you like.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Option(name: .customLong("older-than"), help: "Remove entries stored longer ago than this, such as 7d or 12h.")
    var olderThan: TimeSpan

    func run() async throws {
        let cutoff = Date().addingTimeInterval(-self.olderThan.seconds)
        try await Maintenance.remove(self.options, "stored over \(formatSeconds(self.olderThan.seconds)) ago") {
            disk throws(CacheError) in
            _ = try disk.removeEntries(createdBefore: cutoff)
        }
    }
}

/// `cachalot trim --to SIZE`.
struct Trim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trim",
        abstract: "Remove the least recently used entries until the cache is no larger than a size.",
        discussion: """
            Examples:
              cachalot trim --to 100MB
              cachalot trim --to 0

            Sizes take the units B, KB, MB, GB (powers of 1000) and KiB, MiB, GiB (powers of 1024).
            This trims once; --max-size sets the limit that every run keeps.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Option(help: "The size to trim to, such as 100MB.")
    var to: TrimSize

    /// A size that may be zero.
    struct TrimSize: ExpressibleByArgument {
        let bytes: Int

        init?(argument: String) {
            if Double(argument) == 0 {
                self.bytes = 0
            } else if let size = ByteCount(argument: argument) {
                self.bytes = size.bytes
            } else {
                return nil
            }
        }
    }

    func run() async throws {
        try await Maintenance.remove(self.options, "to fit in \(ByteCount.format(self.to.bytes))") {
            disk throws(CacheError) in
            _ = try disk.trim(toSize: self.to.bytes)
        }
    }
}

/// `cachalot clear`.
struct Clear: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear",
        abstract: "Remove every entry.",
        discussion: """
            Example:
              cachalot clear

            The counts that cachalot stats shows are kept.
            """
    )

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        try await Maintenance.remove(self.options, "") { disk throws(CacheError) in try disk.removeAll() }
    }
}
