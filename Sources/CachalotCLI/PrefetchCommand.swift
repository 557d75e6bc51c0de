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

/// `cachalot prefetch`: many URLs into the cache at once.
struct PrefetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prefetch",
        abstract: "Load URLs into the cache, several at a time, without writing their bodies.",
        discussion: """
            Examples:
              cachalot prefetch https://example.com/a.png https://example.com/b.png
              cachalot prefetch -i urls.txt --concurrency 8
              grep -o 'https://[^"]*' page.html | cachalot prefetch -i -

            A list has one URL a line; blank lines and lines starting with # are skipped. On a \
            terminal a progress bar shows the count, bytes, rate and time left; otherwise each \
            URL gets a line as it finishes. A summary ends the run: fetched, already fresh, \
            revalidated, stale, and each failure with its reason.

            Exit status: 0 if every URL was loaded; else the highest status among the failures \
            (2 an error status, 3 the network, 4 offline and not cached); 130 when interrupted, 143 on SIGTERM.
            """
    )

    @OptionGroup var options: GlobalOptions
    @OptionGroup var storage: StorageOptions
    @OptionGroup var shared: SharedOptions

    @Argument(help: "The http or https URLs to load.")
    var urls: [String] = []

    @Option(
        name: [.customShort("i"), .customLong("input")],
        help: "Read URLs from this file, one a line; - for standard input."
    )
    var input: String?

    @Option(help: "How many URLs to load at once.")
    var concurrency = 4

    @Option(help: "How to use the cache: protocol, cache-else-load, offline, reload or revalidate.")
    var policy: Get.PolicyOption = .protocol

    @Option(help: "Seconds to wait for each server's answer to begin, and at most between two pieces of its body.")
    var timeout: Double = 30

    /// How one URL's load ended.
    enum Outcome: Sendable {
        /// Loaded: `bytes` of its body read, and why it was not stored if it was not.
        case loaded(Resource.Source, status: Int, bytes: Int, url: String, unstored: Unstored?)
        case failed(Failure)

        var bytes: Int {
            if case .loaded(_, _, let bytes, _, _) = self { return bytes }
            return 0
        }

        /// The outcome's line when standard error is not a terminal.
        var line: String {
            switch self {
            case .loaded(let source, let status, let bytes, let url, let unstored):
                let kind = unstored == nil ? PrefetchCommand.kind(source) : "not stored"
                return "\(kind.padding(toLength: 13, withPad: " ", startingAt: 0))  \(status)  "
                    + "\(ByteCount.format(bytes))  \(url)" + (unstored.map { " (\($0.description))" } ?? "")
            case .failed(let failure):
                return "failed         \(failure.message)"
            }
        }
    }

    func validate() throws {
        guard self.urls.isEmpty != (self.input == nil) else {
            throw ValidationError("Give the URLs as arguments or with -i FILE, not both and not neither.")
        }
        guard self.concurrency >= 1 else { throw ValidationError("--concurrency must be at least 1.") }
        guard self.concurrency <= 1_000 else { throw ValidationError("--concurrency must be at most 1000.") }
        try GlobalOptions.validateTimeout(self.timeout)
    }

    func run() async throws {
        let urls = try self.list()
        try await Interruption.cancelling(quiet: self.options.quiet) {
            try await Failure.reporting(quiet: self.options.quiet) { try await self.prefetch(urls) }
        }
    }

    /// The URLs to load, from the arguments or the input; a line that is not an http or https
    /// URL is a usage error, before anything is loaded.
    private func list() throws -> [(String, URL)] {
        var lines: [(number: Int?, text: String)] = self.urls.map { (nil, $0) }
        if let input = self.input {
            let data: Data
            do {
                data = try InputFile.read(input == "-" ? nil : input)
            } catch {
                throw ValidationError("cannot read \(input): \(error).")
            }
            for (number, line) in String(decoding: data, as: UTF8.self).split(
                separator: "\n",
                omittingEmptySubsequences: false
            ).enumerated() {
                let text = line.trimmingCharacters(in: .whitespacesAndNewlines)
                if !text.isEmpty && !text.hasPrefix("#") { lines.append((number + 1, text)) }
            }
        }
        return try lines.map { number, text in
            guard let url = HTTPURL.parse(text) else {
                let source = self.input == "-" ? "standard input" : self.input ?? ""
                let place = number.map { "line \($0) of \(source)" } ?? "'\(text)'"
                throw ValidationError("\(place) is not an http or https URL, such as https://example.com/a.png.")
            }
            return (text, url)
        }
    }

    private func prefetch(_ urls: [(String, URL)]) async throws {
        try await self.shared.withTier(quiet: self.options.quiet) { shared in
            try await self.prefetch(urls, shared: shared)
        }
    }

    private func prefetch(_ urls: [(String, URL)], shared: PostgresCache?) async throws {
        let start = ContinuousClock.now
        let disk = try self.options.openCache()
        let loader = try self.options.makeLoader(
            disk: disk,
            shared: shared,
            policy: self.policy.policy,
            timeout: self.timeout,
            storage: self.storage,
            connectionsPerHost: max(6, self.concurrency)
        )
        let style: ProgressDisplay.Style = self.options.quiet ? .none : isatty(2) != 0 ? .bar : .lines
        let display = ProgressDisplay(style: style, total: urls.count)
        var outcomes: [Outcome] = []
        // A load stopped by an interruption has no outcome: no line, no count.
        await withTaskGroup(of: Outcome?.self) { group in
            var next = urls.indices.makeIterator()
            for _ in 0..<self.concurrency {
                guard let index = next.next() else { break }
                group.addTask { await Self.load(urls[index], index: index, loader: loader, display: display) }
            }
            while let outcome = await group.next() {
                if let outcome { outcomes.append(outcome) }
                if let index = next.next(), !Task.isCancelled {
                    group.addTask { await Self.load(urls[index], index: index, loader: loader, display: display) }
                }
            }
        }
        let unstored = await self.options.finish(loader, disk: disk)
        display.clear()
        try Task.checkCancellation()
        self.summarize(outcomes, after: ContinuousClock.now - start)
        if unstored > 0 {
            throw Failure(
                .cacheUnusable,
                "\(unstored) answer(s) could not be stored in \(disk.directory.path), though they were fetched "
                    + "(free some disk space, or lower --max-size)"
            )
        }
        if let worst = outcomes.compactMap({ if case .failed(let failure) = $0 { failure.status } else { nil } })
            .max()
        {
            throw ExitCode(worst.rawValue)
        }
    }

    private static func load(
        _ url: (text: String, url: URL),
        index: Int,
        loader: ResourceLoader,
        display: ProgressDisplay
    ) async -> Outcome? {
        let outcome: Outcome
        do {
            // Streamed, so that no body is held or spooled for this command, which only stores.
            let answer = try await loader.stream(HTTPRequest(method: .get, url: url.url))
            if let failure = Failure(answer: answer.response, source: answer.source, for: url.text) {
                outcome = .failed(failure)
            } else {
                var bytes = 0
                // Read only while the body may be stored: one that will not be is left unread,
                // and one that outgrows the largest entry (an endless one) is dropped there.
                if Unstored(answer, bytes: 0, limit: loader.maximumEntrySize) == nil {
                    for try await piece in answer.body {
                        bytes += piece.count
                        display.received(bytes, index: index)
                        if answer.source == .network && bytes > loader.maximumEntrySize { break }
                    }
                }
                outcome = .loaded(
                    answer.source,
                    status: answer.response.status.code,
                    bytes: bytes,
                    url: url.text,
                    unstored: Unstored(answer, bytes: bytes, limit: loader.maximumEntrySize)
                )
            }
        } catch is CancellationError {
            return nil
        } catch {
            outcome = .failed(Failure(loading: url.text, error))
        }
        display.finished(outcome, index: index)
        return outcome
    }

    private func summarize(_ outcomes: [Outcome], after elapsed: Duration) {
        var counts: [String: (count: Int, bytes: Int)] = [:]
        var failures: [String] = []
        var unstored: [String: Int] = [:]
        for outcome in outcomes {
            switch outcome {
            case .loaded(let source, _, let bytes, _, let reason):
                let kind = reason == nil ? Self.kind(source) : "not stored"
                counts[kind, default: (0, 0)].count += 1
                counts[kind, default: (0, 0)].bytes += bytes
                if let reason { unstored[reason.description, default: 0] += 1 }
            case .failed(let failure):
                failures.append(failure.message)
            }
        }
        if !self.options.quiet {
            var parts = ["fetched", "already fresh", "revalidated", "stale", "not stored"].compactMap { kind in
                counts[kind].map { "\($0.count) \(kind) (\(ByteCount.format($0.bytes)))" }
            }
            parts.append("\(failures.count) failed")
            GlobalOptions.say(
                "\(outcomes.count) URLs in \(formatDuration(elapsed)): " + parts.joined(separator: ", ")
            )
            for (reason, count) in unstored.sorted(by: { $0.key < $1.key }) {
                GlobalOptions.say("  \(count) not stored: \(reason)")
            }
        }
        for failure in failures { GlobalOptions.say("  \(failure)") }
    }

    /// How a load was answered, as the summary counts it.
    static func kind(_ source: Resource.Source) -> String {
        switch source {
        case .network: "fetched"
        case .memory, .disk, .shared: "already fresh"
        case .revalidated: "revalidated"
        case .stale, .generated: "stale"
        }
    }
}
