import ArgumentParser
import Cachalot
import Foundation
import HTTPTypes

/// `cachalot ls`: what the cache holds.
struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List the cached responses: URL, size, age, freshness and validators.",
        discussion: """
            Examples:
              cachalot ls
              cachalot ls --json | jq '.[] | select(.fresh | not) | .url'

            Responses are listed by URL. A response is fresh while its age is less than its \
            freshness lifetime (from max-age, Expires, or 10 % of the time since Last-Modified); \
            a stale one is revalidated with its validators (ETag, Last-Modified) when next \
            fetched. A URL whose responses vary on request fields (Vary) has one line per variant, \
            with the fields that select it.
            """
    )

    @OptionGroup var options: GlobalOptions

    @Flag(help: "Print a JSON array, one object per response.")
    var json = false

    /// One listed response, as `--json` prints it.
    struct Line: Codable {
        var url: String
        /// The request fields that select this variant, if the URL's responses vary.
        var vary: [String: String]
        var status: Int
        /// Body size in bytes.
        var size: Int
        /// Seconds since the origin made it (RFC 9111 §4.2.3).
        var age: Int
        /// Seconds it stays fresh, counted from its making.
        var freshnessLifetime: Int
        var fresh: Bool
        var etag: String?
        var lastModified: String?
        var stored: Date
        var lastAccessed: Date
    }

    func validate() throws {
        try self.options.refuseSizeLimit(for: "\(Self.configuration.commandName ?? "")")
    }

    func run() async throws {
        try await Failure.reporting(quiet: self.options.quiet) { try self.show() }
    }

    private func show() throws {
        let disk = try self.options.openCache()
        let now = Date()
        let lines: [Line]
        do {
            lines = try disk.storedResponses().map { Self.line($0, now: now) }.sorted { $0.url < $1.url }
        } catch {
            throw Failure(.cacheUnusable, "cannot list \(disk.directory.path): \(Failure.describe(error))")
        }
        if self.json {
            try GlobalOptions.printJSON(lines)
            return
        }
        var table = [["STATUS", "SIZE", "AGE", "FRESHNESS", "VALIDATORS", "URL"]]
        for line in lines {
            let remaining = line.freshnessLifetime - line.age
            let validators = [line.etag.map { _ in "ETag" }, line.lastModified.map { _ in "Last-Modified" }]
            let vary = line.vary.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
            table.append([
                String(line.status),
                ByteCount.format(line.size),
                formatSeconds(TimeInterval(line.age)),
                line.fresh ? "fresh, \(formatSeconds(TimeInterval(remaining))) left" : "stale",
                validators.compactMap { $0 }.joined(separator: ", ").nonEmpty ?? "none",
                line.url + (vary.isEmpty ? "" : " (\(vary.joined(separator: "; ")))"),
            ])
        }
        try OutputFile.standardOutput(Data(Self.aligned(table).utf8))
        if !self.options.quiet {
            let total = lines.reduce(0) { $0 + $1.size }
            GlobalOptions.say("\(lines.count) responses, \(ByteCount.format(total)) of bodies")
        }
    }

    static func line(_ entry: StoredResponseEntry, now: Date) -> Line {
        let response = entry.response
        let age = response.age(at: now)
        let lifetime = response.freshnessLifetime(isShared: false)
        var vary: [String: String] = [:]
        for field in response.varyingFields { vary[field.name] = field.value ?? "" }
        return Line(
            url: entry.url,
            vary: vary,
            status: response.response.status.code,
            size: entry.bodySize,
            age: Int(age.rounded(.down)),
            freshnessLifetime: Int(lifetime.rounded(.down)),
            fresh: age < lifetime,
            etag: response.response.headerFields[.eTag],
            lastModified: response.response.headerFields[.lastModified],
            stored: entry.stored,
            lastAccessed: entry.lastAccessed
        )
    }

    /// The rows as columns padded to their widest cell, the last one unpadded.
    static func aligned(_ rows: [[String]]) -> String {
        guard let columns = rows.first?.count else { return "" }
        let widths = (0..<columns).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == columns - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }.joined(separator: "  ") + "\n"
        }.joined()
    }
}

extension String {
    /// The string, or `nil` if it is empty.
    var nonEmpty: String? { self.isEmpty ? nil : self }
}
