import ArgumentParser

/// A failure the tool reports in one line, with its documented exit status.
struct Failure: Error, CustomStringConvertible {
    /// The exit statuses `cachalot --help` documents.
    enum Status: Int32 {
        case cacheUnusable = 1
        case httpError = 2
        case network = 3
        case notCached = 4
    }

    let status: Status
    let message: String

    init(_ status: Status, _ message: String) {
        self.status = status
        self.message = message
    }

    var description: String { self.message }

    var exitCode: ExitCode { ExitCode(self.status.rawValue) }
}
