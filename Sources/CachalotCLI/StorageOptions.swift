import ArgumentParser
import Cachalot

/// `--max-entry-size`: the option of the commands that store what they load.
struct StorageOptions: ParsableArguments {
    @Option(
        name: .customLong("max-entry-size"),
        help: ArgumentHelp(
            "The largest response stored, such as 50MB (default: 5 % of --max-size).",
            discussion: "A larger response is still answered, but not stored; the command says so."
        )
    )
    var maximumEntrySize: ByteCount?
}

/// Why a response from the network was not stored.
enum Unstored: Sendable, Equatable {
    /// Its body is larger than the largest entry, `limit` bytes.
    case tooLarge(limit: Int)
    /// Its header fields, or its request's, do not allow storing it (`no-store`, `private`,
    /// `Vary: *`, no freshness or validator to keep it by, …).
    case notAllowed

    /// Why `answer`, of which `bytes` were read, was not stored by a loader that stores bodies
    /// of at most `limit` bytes; `nil` if it is stored, or came from the cache.
    init?(_ answer: ResourceStream, bytes: Int, limit: Int) {
        guard answer.source == .network else { return nil }
        if bytes > limit || (answer.length ?? 0) > limit {
            self = .tooLarge(limit: limit)
        } else if !answer.isStoring {
            self = .notAllowed
        } else {
            return nil
        }
    }

    /// The reason, in words that say what to do.
    var description: String {
        switch self {
        case .tooLarge(let limit):
            "larger than \(ByteCount.format(limit)), the largest response stored (5 % of --max-size, "
                + "or --max-entry-size)"
        case .notAllowed:
            "the response's header fields do not allow storing it"
        }
    }
}
