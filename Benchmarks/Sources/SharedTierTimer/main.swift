import Foundation

// The shared tier on PostgreSQL against what it is built on, as
// Benchmarks/shared-tier-vs-postgres-redis runs it on a throwaway server with two databases (one
// for logged tables, one for UNLOGGED):
//
// - a hit of 32 KiB, `PostgresCache.entry(forKey:)`, against a bare postgres-nio
//   `SELECT value, metadata FROM cachalot_entries WHERE digest = $1` of the same row;
// - a set of 32 KiB, `PostgresCache.set`, against a bare `INSERT … ON CONFLICT (digest) DO UPDATE`
//   of the same columns into a table of the same columns with only its primary key, in each
//   database, of new keys and of keys already there, with the WAL each side writes;
// - a loader (memory tier off) whose disk is cold, so that every load is answered by the shared
//   tier and promoted to that disk, and the same loader with no disk tier, each against the same
//   loader answered by its own warm disk;
// - where a set's time goes: the bare upsert built up one part of the shared tier's table and
//   statement at a time, up to `PostgresCache.set` (SetLadder), in each database;
// - sets and hits of rows of 1, 8 and 32 MiB against the bare statements.
//
// Sequential: one call at a time. Every round times both sides in alternating blocks of calls;
// the tables give each round's medians and means and their ratios.
//
// With `scale` first, as Benchmarks/shared-tier-at-scale runs it, it measures one logged database
// as its table grows from 10,000 to 1,000,000 rows instead (see ScaleBenchmark). Usage:
// SharedTierTimer PORT LOGGED_DATABASE UNLOGGED_DATABASE [ROUNDS]   (default 5 rounds)
// SharedTierTimer scale PORT DATABASE [ROUNDS]                      (default 3 rounds)
// SharedTierTimer sets PORT LOGGED_DATABASE UNLOGGED_DATABASE [ROUNDS]   (only where a set's time goes)

let arguments = CommandLine.arguments
if arguments.count >= 4, arguments[1] == "scale", let port = Int(arguments[2]) {
    let rounds = arguments.count == 5 ? Int(arguments[4]) ?? 3 : 3
    // 1 TiB: the tier trims nothing but by age while the table grows.
    let database = try Database(port: port, name: arguments[3], isUnlogged: false, maximumSize: 1 << 40)
    try await running([database]) {
        try await database.prepare()
        print(try await database.settings() + ".\n")
        var benchmark = ScaleBenchmark(database: database, rounds: rounds)
        try await benchmark.run()
    }
    exit(0)
}
if arguments.count >= 5, arguments[1] == "sets", let port = Int(arguments[2]) {
    let rounds = arguments.count == 6 ? Int(arguments[5]) ?? 5 : 5
    try await measureSets(port: port, loggedDatabase: arguments[3], unloggedDatabase: arguments[4], rounds: rounds)
    exit(0)
}
guard arguments.count == 4 || arguments.count == 5, let port = Int(arguments[1]) else {
    FileHandle.standardError.write(
        Data(
            """
            usage: SharedTierTimer PORT LOGGED_DATABASE UNLOGGED_DATABASE [ROUNDS]
                   SharedTierTimer scale PORT DATABASE [ROUNDS]
                   SharedTierTimer sets PORT LOGGED_DATABASE UNLOGGED_DATABASE [ROUNDS]

            """.utf8
        )
    )
    exit(64)
}
let rounds = arguments.count == 5 ? Int(arguments[4]) ?? 5 : 5

try await measure(port: port, loggedDatabase: arguments[2], unloggedDatabase: arguments[3], rounds: rounds)
