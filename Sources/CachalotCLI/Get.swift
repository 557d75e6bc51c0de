import ArgumentParser
import Cachalot
import CachalotPostgres
import Foundation
import HTTPTypes

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `cachalot get`: one URL to standard output or a file, through the cache.
struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Fetch a URL through the cache and write its body.",
        discussion: """
            Examples:
              cachalot get https://example.com/logo.png -o logo.png
              cachalot get -v -H 'Accept-Language: fr' https://example.com/
              cachalot --offline get https://example.com/logo.png > logo.png

            On standard error it says where the answer came from (memory, disk, network, \
            revalidated for a 304, or stale and why), with the status, the size and the time \
            taken: always with -v, in short when standard error is a terminal, never with -q.
            """
    )

    @OptionGroup var options: GlobalOptions
    @OptionGroup var storage: StorageOptions
    @OptionGroup var shared: SharedOptions

    @Argument(help: "The http or https URL to fetch.")
    var url: String

    @Option(name: .shortAndLong, help: "Write the body to this file instead of standard output.")
    var output: String?

    @Option(name: .customShort("H"), help: "A request header field, as 'Name: value'; repeat for more.")
    var header: [String] = []

    @Option(help: "How to use the cache: protocol, cache-else-load, offline, reload or revalidate.")
    var policy: PolicyOption = .protocol

    @Option(help: "Seconds to wait for the server's answer to begin, and at most between two pieces of its body.")
    var timeout: Double = 30

    @Option(name: .customLong("max-time"), help: "Seconds the whole transfer may take (default: no limit).")
    var maximumTime: Double?

    @Flag(name: .shortAndLong, help: "Say where the answer came from, with its status, size and time.")
    var verbose = false

    enum PolicyOption: String, ExpressibleByArgument, CaseIterable {
        case `protocol`
        case cacheElseLoad = "cache-else-load"
        case offline, reload, revalidate

        var policy: CachePolicy {
            switch self {
            case .protocol: .useProtocolCachePolicy
            case .cacheElseLoad: .returnCacheDataElseLoad
            case .offline: .returnCacheDataDontLoad
            case .reload: .reloadIgnoringCacheData
            case .revalidate: .reloadRevalidatingCacheData
            }
        }
    }

    func validate() throws {
        guard HTTPURL.parse(self.url) != nil else {
            throw ValidationError("'\(self.url)' is not an http or https URL, such as https://example.com/a.png.")
        }
        for field in self.header where Self.field(field) == nil {
            throw ValidationError("'\(field)' is not a header field; write it as 'Name: value'.")
        }
        try GlobalOptions.validateTimeout(self.timeout)
        if let maximumTime = self.maximumTime {
            guard maximumTime.isFinite, maximumTime >= 0.001, maximumTime <= 604_800 else {
                throw ValidationError("--max-time must be a number of seconds from 0.001 to 604800 (a week).")
            }
        }
    }

    func run() async throws {
        try await Interruption.cancelling(quiet: self.options.quiet) {
            try await Failure.reporting(quiet: self.options.quiet) {
                try await TimeLimit.run(self.maximumTime) { try await self.fetch() }
            }
        }
    }

    private func fetch() async throws {
        try await self.shared.withTier(quiet: self.options.quiet) { shared in try await self.fetch(shared: shared) }
    }

    private func fetch(shared: PostgresCache?) async throws {
        let start = ContinuousClock.now
        let disk = try self.options.openCacheForLoading()
        let loader = try self.options.makeLoader(
            disk: disk,
            shared: shared,
            policy: self.policy.policy,
            timeout: self.timeout,
            storage: self.storage
        )
        guard let url = HTTPURL.parse(self.url) else { throw ValidationError("'\(self.url)' is not an http URL.") }
        var request = HTTPRequest(method: .get, url: url)
        for field in self.header.compactMap(Self.field) { request.headerFields.append(field) }
        let transferred: Result<(ResourceStream, Int), any Error>
        do {
            transferred = .success(try await self.transfer(request, with: loader))
        } catch {
            transferred = .failure(error)
        }
        // Also when interrupted: what was loaded is on disk, and nothing partial is left.
        self.options.warnUnstored(await self.options.finish(loader, disk: disk), in: disk)
        let (answer, bytes): (ResourceStream, Int)
        do {
            (answer, bytes) = try transferred.get()
        } catch is CancellationError {
            throw CancellationError()
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(loading: self.url, error)
        }
        self.report(
            answer,
            bytes: bytes,
            unstored: Unstored(answer, bytes: bytes, limit: loader.maximumEntrySize),
            after: ContinuousClock.now - start
        )
        if let failure = Failure(answer: answer.response, source: answer.source, for: self.url) { throw failure }
    }

    /// Loads `request` and writes its body as it arrives, to the output file (whole or not at
    /// all) or to standard output; returns the answer and how many bytes were written. The body
    /// is never held whole: one that can never be stored passes straight through.
    private func transfer(_ request: HTTPRequest, with loader: ResourceLoader) async throws -> (ResourceStream, Int) {
        let answer = try await loader.stream(request)
        if answer.source == .generated,
            let failure = Failure(answer: answer.response, source: .generated, for: self.url)
        {
            throw failure
        }
        let output: OutputFile
        do {
            output = try OutputFile(path: self.output)
        } catch {
            throw Failure(.cacheUnusable, "cannot write \(error)")
        }
        var bytes = 0
        do {
            for try await piece in answer.body {
                try output.write(piece)
                bytes += piece.count
            }
            try output.finish()
        } catch let error as OutputFile.WriteError {
            output.discard()
            throw Failure(.cacheUnusable, "cannot write \(error)")
        } catch {
            output.discard()
            throw error
        }
        return (answer, bytes)
    }

    private func report(_ answer: ResourceStream, bytes: Int, unstored: Unstored?, after elapsed: Duration) {
        guard !self.options.quiet, self.verbose || isatty(2) != 0 else { return }
        let source = Self.describe(answer.source)
        var line = "\(source) · \(answer.response.status.code) · \(ByteCount.format(bytes))"
        line += " · \(formatDuration(elapsed))"
        if self.verbose, let age = answer.response.headerFields[.age] { line += " · age \(age) s" }
        if self.verbose, let unstored { line += " · not stored: \(unstored.description)" }
        if self.verbose, !answer.redirects.isEmpty {
            line += " · via \(answer.redirects.map(\.absoluteString).joined(separator: " → "))"
        }
        GlobalOptions.say(line)
    }

    /// Where an answer came from, in words.
    static func describe(_ source: Resource.Source) -> String {
        switch source {
        case .memory: "memory"
        case .disk: "disk"
        case .shared: "shared"
        case .network: "network"
        case .revalidated: "revalidated (304)"
        case .stale(.maxStale): "stale (max-stale)"
        case .stale(.whileRevalidating): "stale (revalidating)"
        case .stale(.originError): "stale (origin error)"
        case .stale(.unreachable): "stale (origin unreachable)"
        case .stale(.policy): "stale (cache policy)"
        case .generated: "not cached"
        }
    }

    /// The header field that `text` spells as `Name: value`, or `nil`.
    static func field(_ text: String) -> HTTPField? {
        guard let colon = text.firstIndex(of: ":"),
            let name = HTTPField.Name(String(text[..<colon]).trimmingCharacters(in: .whitespaces))
        else { return nil }
        return HTTPField(
            name: name,
            value: String(text[text.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
        )
    }
}
