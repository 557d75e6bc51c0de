import ArgumentParser
import Cachalot
import CachalotPostgres
import Foundation

/// `cachalot db`: the shared tier's databases.
struct DatabaseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "db",
        abstract: "Manage the PostgreSQL databases of the shared tier (--shared).",
        subcommands: [Initialize.self]
    )

    /// `cachalot db init`: creates the schema, for operators who create schemas by hand.
    struct Initialize: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Create the shared tier's tables in each database, if they are not there.",
            discussion: """
                Examples:
                  cachalot db init --shared postgres://cachalot@db.internal/cache
                  CACHALOT_SHARED="postgres://cachalot@db1/cache postgres://cachalot@db2/cache" cachalot db init

                Without it, the tables are created on first use. A database whose tables are of \
                another version of Cachalot is left alone, and reported (exit status 1).
                """
        )

        @OptionGroup var options: GlobalOptions
        @OptionGroup var shared: SharedOptions

        @Flag(help: "Create the entries' table UNLOGGED: faster writes, emptied if the database crashes.")
        var unlogged = false

        func run() async throws {
            try await Failure.reporting(quiet: self.options.quiet) { try await self.initialize() }
        }

        private func initialize() async throws {
            let databases = try self.shared.databases()
            guard !databases.isEmpty else {
                throw ValidationError("Name the databases with --shared or CACHALOT_SHARED.")
            }
            for database in databases {
                let cache = try PostgresCache(configuration: .init(databases: [database], isUnlogged: self.unlogged))
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await cache.run() }
                    defer { group.cancelAll() }
                    do {
                        try await cache.prepare()
                    } catch {
                        throw Failure(.cacheUnusable, "cannot prepare \(database): \(Failure.describe(error))")
                    }
                }
                if !self.options.quiet {
                    try OutputFile.standardOutput(Data("ready: \(database)\n".utf8))
                }
            }
        }
    }
}
