import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL server for a test (Linux): a cluster that `initdb` makes in a temporary
/// directory, listening on 127.0.0.1 at a free port, with trust authentication for the user
/// `postgres`. When the tests run as root, the server runs as the `postgres` user, since
/// PostgreSQL refuses root. ``stop()`` and ``start()-swift.method`` stop and start it again (for outage
/// tests); ``remove()`` stops it for good and deletes its directory.
public final class PostgresCluster: Sendable {
    /// The directory that holds the cluster's data, its log and its socket.
    public let directory: URL
    /// The TCP port it listens on, on 127.0.0.1.
    public let port: Int

    /// The directory of PostgreSQL's programs: the newest version installed (10 to 30, under
    /// `/usr/lib/postgresql`); `nil` if none is.
    public static let binaries: String? = {
        let directories = (10...30).reversed().map { "/usr/lib/postgresql/\($0)/bin" }
        return directories.first { FileManager.default.isExecutableFile(atPath: "\($0)/initdb") }
    }()

    /// Whether the tests that need a server can run: PostgreSQL is installed, or CI runs them
    /// (where its absence must fail, not skip).
    public static var isAvailable: Bool {
        Self.binaries != nil || ProcessInfo.processInfo.environment["CI"] != nil
    }

    private init(directory: URL, port: Int) {
        self.directory = directory
        self.port = port
    }

    /// Makes and starts a cluster: a new temporary directory, `initdb`, then ``start()-swift.method``.
    ///
    /// - Throws: ``ClusterError`` if PostgreSQL is not installed, there is no `postgres` user to
    ///   run it as root, or `initdb` or `pg_ctl` fails; a Foundation error if the directory cannot
    ///   be made. The directory is left behind when this throws.
    public static func start() async throws -> PostgresCluster {
        let directory = FileManager.default.temporaryDirectory.appending(path: "cachalot-pg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        if getuid() == 0 {
            guard let user = getpwnam("postgres") else {
                throw ClusterError("There is no postgres user to run the server as.")
            }
            chown(directory.path, user.pointee.pw_uid, user.pointee.pw_gid)
        }
        let cluster = PostgresCluster(directory: directory, port: try Self.freePort())
        try await cluster.run(
            "initdb",
            ["-D", cluster.data, "--username=postgres", "--auth=trust", "--encoding=UTF8", "--no-sync"]
        )
        try await cluster.start()
        return cluster
    }

    private var data: String { self.directory.appending(path: "data").path }

    /// The URL of `database` on this server, for the user `postgres`.
    ///
    /// - Parameter database: The database's name. Default: `postgres`, which `initdb` makes.
    public func url(_ database: String = "postgres") -> String {
        "postgres://postgres@127.0.0.1:\(self.port)/\(database)"
    }

    /// Makes a database with `createdb`.
    ///
    /// - Throws: ``ClusterError`` if `createdb` fails (the name is taken, the server is stopped).
    public func createDatabase(_ name: String) async throws {
        try await self.run("createdb", ["-h", "127.0.0.1", "-p", "\(self.port)", "-U", "postgres", name])
    }

    /// Runs `sql` in `database` with psql; returns what it printed (unaligned, tuples only).
    ///
    /// - Parameters:
    ///   - sql: The statements, run with `ON_ERROR_STOP`.
    ///   - database: The database to run them in. Default: `postgres`.
    /// - Throws: ``ClusterError`` if psql exits with an error, with what it printed.
    @discardableResult
    public func sql(_ sql: String, in database: String = "postgres") async throws -> String {
        try await self.run(
            "psql",
            [
                "-h", "127.0.0.1", "-p", "\(self.port)", "-U", "postgres", "-d", database, "-v", "ON_ERROR_STOP=1",
                "-A", "-t", "-c", sql,
            ]
        )
    }

    /// Starts the server (again), waiting until it accepts connections (at most 60 seconds).
    ///
    /// - Throws: ``ClusterError`` if `pg_ctl start` fails or times out.
    public func start() async throws {
        try await self.run(
            "pg_ctl",
            [
                "-D", self.data, "-l", self.directory.appending(path: "server.log").path, "-w", "-t", "60", "-o",
                "-p \(self.port) -k \(self.directory.path) -c listen_addresses=127.0.0.1 -c fsync=off "
                    + "-c full_page_writes=off", "start",
            ]
        )
    }

    /// Stops the server at once (`immediate`: as a crash would), waiting until it is gone.
    ///
    /// - Throws: ``ClusterError`` if `pg_ctl stop` fails, such as when the server is not running.
    public func stop() async throws {
        try await self.run("pg_ctl", ["-D", self.data, "-m", "immediate", "-w", "stop"])
    }

    /// Stops the server if it runs, and deletes its directory.
    public func remove() async {
        _ = try? await self.stop()
        try? FileManager.default.removeItem(at: self.directory)
    }

    /// Runs the cluster around `body`, and removes it after, whatever `body` does.
    ///
    /// - Returns: What `body` returns.
    /// - Throws: What ``start()-swift.type.method`` throws, or what `body` throws.
    public static func with<Result>(_ body: (PostgresCluster) async throws -> Result) async throws -> Result {
        let cluster = try await Self.start()
        do {
            let result = try await body(cluster)
            await cluster.remove()
            return result
        } catch {
            await cluster.remove()
            throw error
        }
    }

    /// Why the cluster could not be made, started or stopped.
    public struct ClusterError: Error, CustomStringConvertible {
        /// What went wrong: the command, its exit status and its output.
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// Runs one of PostgreSQL's programs (as `postgres` when root), on a thread of its own so
    /// that waiting for it holds no thread of the cooperative pool; returns its output.
    @discardableResult
    private func run(_ program: String, _ arguments: [String]) async throws -> String {
        guard let binaries = Self.binaries else {
            throw ClusterError("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin); .ci/run installs it.")
        }
        var argv = ["\(binaries)/\(program)"] + arguments
        if getuid() == 0 {
            argv = ["/usr/bin/setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] + argv
        }
        let log = self.directory.appending(path: "command-\(UUID().uuidString).log").path
        let status = try await Self.spawnAndWait(argv, output: log)
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(atPath: log)
        guard status == 0 else {
            throw ClusterError("\(program) \(arguments.joined(separator: " ")) exited with \(status): \(output)")
        }
        return output
    }

    private static func spawnAndWait(_ argv: [String], output: String) async throws -> Int32 {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                var actions = posix_spawn_file_actions_t()
                posix_spawn_file_actions_init(&actions)
                defer { posix_spawn_file_actions_destroy(&actions) }
                posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
                posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
                posix_spawn_file_actions_adddup2(&actions, 1, 2)
                var pid: pid_t = 0
                let cArguments = argv.map { strdup($0) } + [nil]
                defer { for argument in cArguments { free(argument) } }
                let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ)
                guard spawned == 0 else {
                    continuation.resume(throwing: ClusterError("Starting \(argv[0]) failed: errno \(spawned)."))
                    return
                }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                // The exit status, or 128 plus the signal that ended it.
                let exited = status & 0x7f == 0
                continuation.resume(returning: exited ? (status >> 8) & 0xff : 128 + (status & 0x7f))
            }
            thread.start()
        }
    }

    /// A TCP port on 127.0.0.1 that nothing listens on now.
    private static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw ClusterError("socket() failed: errno \(errno).") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, length) == 0
                    && getsockname(socket, $0, &length) == 0
            }
        }
        guard bound else { throw ClusterError("Finding a free port failed: errno \(errno).") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
