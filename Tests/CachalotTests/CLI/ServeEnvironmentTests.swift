import CachalotServer
import Foundation
import Testing

@testable import CachalotCLI

@Suite("cachalot serve: options from the environment")
struct ServeEnvironmentTests {
    let options = Serve.environment

    /// An origin, and a listening address that would stop the server before it listens: a child
    /// that gets past the check under test ends with another message instead of serving forever.
    static let unstartable = ["CACHALOT_ORIGIN": "http://127.0.0.1:9", "CACHALOT_LISTEN": "not-an-address"]

    @Test("A variable gives its option after the command's name, in the form --name=value")
    func valueBecomesOption() throws {
        let arguments = try self.options.arguments(
            ["serve", "--listen", "127.0.0.1:0"],
            environment: ["CACHALOT_TIMEOUT": "-1", "CACHALOT_ORIGIN": "http://127.0.0.1:9"]
        )
        #expect(arguments == ["serve", "--origin=http://127.0.0.1:9", "--timeout=-1", "--listen", "127.0.0.1:0"])
    }

    @Test(
        "An option on the command line wins over its variable, in either form",
        arguments: ["--timeout", "--timeout=3"]
    )
    func commandLineWins(given: String) throws {
        let command = given.contains("=") ? ["serve", given] : ["serve", given, "3"]
        let arguments = try self.options.arguments(command, environment: ["CACHALOT_TIMEOUT": "9"])
        #expect(arguments == command)
    }

    @Test("Arguments after -- are not options, so their variable still counts")
    func afterTerminator() throws {
        let arguments = try self.options.arguments(
            ["serve", "--", "--timeout"],
            environment: ["CACHALOT_TIMEOUT": "9"]
        )
        #expect(arguments == ["serve", "--timeout=9", "--", "--timeout"])
    }

    @Test("A flag's variable is on with 1, true, yes or on, off with 0, false, no or off, and refused otherwise")
    func flags() throws {
        for on in ["1", "true", "YES", "on"] {
            #expect(
                try self.options.arguments(["serve"], environment: ["CACHALOT_IMAGES": on]) == ["serve", "--images"]
            )
        }
        for off in ["0", "false", "No", "off"] {
            #expect(try self.options.arguments(["serve"], environment: ["CACHALOT_IMAGES": off]) == ["serve"])
        }
        #expect(throws: (any Error).self) {
            try self.options.arguments(["serve"], environment: ["CACHALOT_IMAGES": "maybe"])
        }
    }

    @Test("A list's variable gives the option once per item, trimmed, and an empty variable gives nothing")
    func lists() throws {
        let arguments = try self.options.arguments(
            ["serve"],
            environment: ["CACHALOT_TRUSTED_PROXIES": " 10.0.0.1, ,10.0.0.2 ", "CACHALOT_ADMIN_TOKEN": ""]
        )
        #expect(arguments == ["serve", "--trusted-proxy=10.0.0.1", "--trusted-proxy=10.0.0.2"])
    }

    @Test(
        "-q turns the access log off unless --access-log names a format; the variable gives it; a bad name is refused"
    )
    func accessLogAndQuiet() throws {
        func format(_ name: String?, quiet: Bool) throws -> String? {
            try Serve.accessLog(named: name, quiet: quiet).map { "\($0.format)" }
        }
        #expect(try format(nil, quiet: false) == "text")
        #expect(try format(nil, quiet: true) == nil)
        #expect(try format("json", quiet: true) == "json")
        #expect(try format("text", quiet: false) == "text")
        #expect(try format("off", quiet: false) == nil)
        #expect(throws: (any Error).self) { try format("yaml", quiet: false) }
        let arguments = try self.options.arguments(["serve", "-q"], environment: ["CACHALOT_ACCESS_LOG": "json"])
        #expect(arguments == ["serve", "--access-log=json", "-q"])
    }

    @Test("Other commands are left as they are")
    func otherCommands() throws {
        let arguments = try self.options.arguments(["get", "http://x/"], environment: ["CACHALOT_TIMEOUT": "1"])
        #expect(arguments == ["get", "http://x/"])
    }

    @Test("Every option that serve --help lists has a variable, and the help names them all")
    func everyOptionHasAVariable() async throws {
        let child = try ChildProcess.start(CommandLineTool.executable, ["serve", "--help"], capturingOutput: true)
        let run = await CommandLineTool.finish(child)
        #expect(run.status == 0)
        let listed = Set(run.output.matches(of: /--[a-z][a-z0-9-]*/).map { String($0.output) })
            .subtracting(["--help", "--version"])
        let covered = Set(self.options.options.map(\.name))
        #expect(!listed.isEmpty)
        #expect(listed.subtracting(covered).isEmpty, "options without a variable: \(listed.subtracting(covered))")
        for option in self.options.options {
            #expect(run.output.contains(option.variable), "\(option.variable) is not in serve --help")
        }
    }

    @Test("The child reads a variable as its option: CACHALOT_TIMEOUT=0 is refused like --timeout 0")
    func childReadsVariables() async throws {
        let tool = try CommandLineTool()
        let run = try await tool.run(
            ["serve"],
            environment: Self.unstartable.merging(["CACHALOT_TIMEOUT": "0"]) { $1 }
        )
        #expect(run.status == 64)
        #expect(run.errors.contains("--timeout must be"), "\(run.errors)")
    }

    @Test("A flag's variable that is neither on nor off ends the command with status 64, naming the variable")
    func childRefusesBadFlag() async throws {
        let tool = try CommandLineTool()
        let run = try await tool.run(["serve"], environment: ["CACHALOT_IMAGES": "maybe"])
        #expect(run.status == 64)
        #expect(run.errors.contains("CACHALOT_IMAGES must be 1 or 0"), "\(run.errors)")
    }

    @Test("serve refuses --offline, which it cannot obey, from the command line or the environment")
    func offlineRefused() async throws {
        let tool = try CommandLineTool()
        for (arguments, environment) in [(["serve", "--offline"], [:]), (["serve"], ["CACHALOT_OFFLINE": "1"])] {
            let run = try await tool.run(arguments, environment: environment.merging(Self.unstartable) { $1 })
            #expect(run.status == 64)
            #expect(run.errors.contains("--offline is for get"), "\(run.errors)")
        }
    }
}
