import ArgumentParser
import Cachalot
import HTTPTypes

/// A failure the tool reports in one line, with its documented exit status.
struct Failure: Error, CustomStringConvertible {
    /// The exit statuses `cachalot --help` documents.
    enum Status: Int32, Comparable {
        case cacheUnusable = 1
        case httpError = 2
        case network = 3
        case notCached = 4
        /// The answer is not an image the tool can decode (`cachalot image`).
        case notAnImage = 5
        /// Standard output's reader went away: 128 + SIGPIPE, as a shell reports a process that
        /// SIGPIPE ended. Said with no message.
        case closedOutput = 141

        static func < (lhs: Status, rhs: Status) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    let status: Status
    let message: String

    init(_ status: Status, _ message: String) {
        self.status = status
        self.message = message
    }

    /// The failure of loading `url`: what went wrong, and what to do about it.
    init(loading url: String, _ error: any Error) {
        guard let error = error as? LoadError else {
            self.init(.network, "could not fetch \(url): \(Self.describe(error))")
            return
        }
        if error.code == .invalidResponse {
            self.init(.network, "could not fetch \(url): \(error.message)")
            return
        }
        if error.code == .storage {
            self.init(
                .cacheUnusable,
                "could not store \(url): \(Self.describe(error.underlying ?? error)) "
                    + "(free some disk space, or lower --max-size)"
            )
            return
        }
        let (cause, advice) = Self.explain(error.underlying.map { Self.describe($0) } ?? error.message)
        self.init(.network, "could not fetch \(url): \(cause) (\(advice))")
    }

    /// The failure of an answer with an error status, or a redirect that was not followed, or
    /// `nil` if the answer is neither.
    init?(answer response: HTTPResponse, source: Resource.Source, for url: String) {
        let status = response.status
        switch source {
        case .generated:
            self.init(.notCached, "\(url) is not in the cache, and the policy forbids loading it.")
        case _ where status.code >= 400:
            self.init(.httpError, "the server answered \(status.code) \(status.reasonPhrase) for \(url)")
        // A 304 answers the caller's own conditional request (-H If-None-Match): not a failure.
        case _ where (300..<400).contains(status.code) && status.code != 304:
            let target = response.headerFields[.location].map { "to \($0)" } ?? "without a Location"
            self.init(
                .httpError,
                "the server answered \(status.code) \(status.reasonPhrase) for \(url), a redirect \(target) "
                    + "that was not followed (only http and https are followed, at most 20 in a row)"
            )
        default:
            return nil
        }
    }

    /// ``init(answer:source:for:)`` of a loaded resource.
    init?(answer resource: Resource, for url: String) {
        self.init(answer: resource.response, source: resource.source, for: url)
    }

    var description: String { self.message }

    /// Runs a command's `body`; a failure is said in one line, `cachalot: message` (unless it is
    /// an error status and the command is `quiet`), and ends the command with its status.
    static func reporting(quiet: Bool, _ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let failure as Failure {
            let isSilent = failure.status == .closedOutput || (quiet && failure.status == .httpError)
            if !isSilent { GlobalOptions.say("cachalot: \(failure.message)") }
            throw failure.exitCode
        }
    }

    var exitCode: ExitCode { ExitCode(self.status.rawValue) }

    /// `error` in words: a cache error's message, else the error's own description.
    static func describe(_ error: any Error) -> String {
        (error as? CacheError)?.message ?? "\(error)"
    }

    /// A transport failure in plain words, and what to do about it, judged from its description.
    private static func explain(_ description: String) -> (cause: String, advice: String) {
        let text = description.lowercased()
        if text.contains("dns") || text.contains("unknownhost") || text.contains("name or service not known") {
            return ("the host name is unknown", "check the host name")
        }
        if text.contains("refused") {
            return ("the connection was refused", "check the address and port, and that the server is up")
        }
        if text.contains("tls") || text.contains("ssl") || text.contains("certificate") || text.contains("handshake") {
            return ("TLS failed: \(description)", "check the scheme, http or https, and the server's certificate")
        }
        if text.contains("timeout") || text.contains("timed out") || text.contains("deadline") {
            return ("the server did not answer in time", "try a longer --timeout")
        }
        return (description, "check the address, that the server is up, and the network")
    }
}
