import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started with `posix_spawn` and reaped with `waitpid`, for tests.
///
/// Foundation's `Process` on Linux can miss a child's exit and wait forever (seen here with a
/// `mount` that had exited); these few system calls cannot.
struct ChildProcess {
    let pid: pid_t
    /// The read end of the child's standard output, or -1 if it goes to a file no one reads.
    let output: Int32
    /// The read end of the child's standard error.
    let errors: Int32

    struct SpawnFailed: Error {
        let status: Int32
    }

    /// Starts `executable` with `arguments` and this process's environment with `environment`'s
    /// variables set; standard output is captured only if asked.
    /// Standard input is `input` (a file), else /dev/null. Standard error is a pipe, or a
    /// pseudo-terminal if `errorsToTerminal`, so that the child sees a terminal there.
    static func start(
        _ executable: String,
        _ arguments: [String],
        capturingOutput: Bool = false,
        input: String? = nil,
        errorsToTerminal: Bool = false,
        environment: [String: String] = [:]
    ) throws -> ChildProcess {
        var outputPipe: [Int32] = [-1, -1]
        var errorPipe: [Int32] = [-1, -1]
        // Made and marked close-on-exec while no other child is being started, so that a child
        // another test starts meanwhile does not hold these pipes open (a reader would then wait
        // for that child's end, not this one's, and a writer whose reader closed its end would
        // block instead of failing).
        Self.spawning.lock()
        defer { Self.spawning.unlock() }
        if capturingOutput {
            _ = pipe(&outputPipe)
        } else {
            // A file of its own, removed at once (the child keeps it open), rather than a
            // device: what the child writes is real output, only unread.
            var path = Array("\(NSTemporaryDirectory())/cachalot-child-output-XXXXXX".utf8CString)
            outputPipe[1] = mkstemp(&path)
            guard outputPipe[1] >= 0 else { throw SpawnFailed(status: errno) }
            unlink(path)
        }
        if errorsToTerminal {
            errorPipe = try Self.openTerminal()
        } else {
            _ = pipe(&errorPipe)
        }
        for descriptor in outputPipe + errorPipe where descriptor >= 0 {
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        }
        #if canImport(Glibc)
        var actions = posix_spawn_file_actions_t()
        #else
        var actions: posix_spawn_file_actions_t?
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
        if capturingOutput { posix_spawn_file_actions_addclose(&actions, outputPipe[0]) }
        posix_spawn_file_actions_addopen(&actions, 0, input ?? "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        posix_spawn_file_actions_addclose(&actions, errorPipe[0])
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        // SIGPIPE as a shell leaves it: this process ignores it (SwiftNIO does), and a child
        // would inherit that.
        #if canImport(Glibc)
        var attributes = posix_spawnattr_t()
        #else
        var attributes: posix_spawnattr_t?
        #endif
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF))
        var pid = pid_t()
        // This process's environment, with `environment`'s variables set.
        let variables = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for variable in envp { free(variable) } }
        let status = posix_spawnp(&pid, executable, &actions, &attributes, argv, envp)
        close(outputPipe[1])
        close(errorPipe[1])
        guard status == 0 else { throw SpawnFailed(status: status) }
        return ChildProcess(pid: pid, output: capturingOutput ? outputPipe[0] : -1, errors: errorPipe[0])
    }

    /// Held from making a child's pipes to starting it.
    private static let spawning = NSLock()

    /// A new pseudo-terminal: its controller's descriptor (read by the parent) and its
    /// terminal's (given to the child). Linux only: Swift does not see `posix_openpt`, so this
    /// opens /dev/ptmx and unlocks and names the terminal with the ioctls behind it.
    private static func openTerminal() throws -> [Int32] {
        #if os(Linux)
        let (setLock, getNumber): (UInt, UInt) = (0x4004_5431, 0x8004_5430)  // TIOCSPTLCK, TIOCGPTN
        let controller = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        var unlock: Int32 = 0
        var number: Int32 = 0
        guard controller >= 0, ioctl(controller, setLock, &unlock) == 0, ioctl(controller, getNumber, &number) == 0
        else { throw SpawnFailed(status: errno) }
        let terminal = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY)
        guard terminal >= 0 else { throw SpawnFailed(status: errno) }
        return [controller, terminal]
        #else
        throw SpawnFailed(status: ENOTSUP)
        #endif
    }

    /// Reads standard output until at least `count` newlines have come, or it ends; returns how
    /// many came (one read may bring more than asked for).
    func waitForLines(_ count: Int) -> Int {
        var lines = 0
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while lines < count {
            let count = buffer.withUnsafeMutableBytes { read(self.output, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            lines += buffer[0..<count].filter { $0 == UInt8(ascii: "\n") }.count
        }
        return lines
    }

    /// Reads standard output to its end.
    func readOutput() -> [UInt8] {
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(self.output, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            output.append(contentsOf: buffer[0..<count])
        }
        return output
    }

    /// Sends `signal` to the child.
    func send(_ signal: Int32) {
        _ = kill(self.pid, signal)
    }

    /// Waits for the child to end; returns its exit status, or 128 + the signal that ended it,
    /// and what it wrote to standard error.
    func waitForExit() -> (status: Int32, errors: String) {
        let ending = self.waitForExit(closingOutput: true)
        return (ending.status, ending.errors)
    }

    /// Closes standard output's read end at once, as a reader that stops early does (the
    /// child's next write then fails with EPIPE), and waits for the child to end.
    /// The status is the child's own exit status, or 128 + the signal that ended it, as
    /// `waitForExit()` gives it; `signal` tells the two apart (0 for an exit of its own).
    func closeOutputAndWaitForExit() -> (status: Int32, errors: String, signal: Int32) {
        if self.output >= 0 { close(self.output) }
        return self.waitForExit(closingOutput: false)
    }

    private func waitForExit(closingOutput: Bool) -> (status: Int32, errors: String, signal: Int32) {
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(self.errors, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            text.append(contentsOf: buffer[0..<count])
        }
        var status: Int32 = 0
        while waitpid(self.pid, &status, 0) == -1 && errno == EINTR {}
        close(self.errors)
        if closingOutput, self.output >= 0 { close(self.output) }
        let signal = status & 0x7F
        return (signal == 0 ? (status >> 8) & 0xFF : 128 + signal, String(decoding: text, as: UTF8.self), signal)
    }
}
