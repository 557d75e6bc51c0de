import Cachalot
import Foundation
import Synchronization

/// The `Date` field the proxy adds to a response without one, formatted once a second (as
/// nginx and Hummingbird do) rather than once a response.
enum DateField {
    private static let last = Mutex<(second: Int, text: String)>((Int.min, ""))

    /// `date` as an IMF-fixdate (``HTTPDate/format(_:)``), made again only when its second is
    /// not the one formatted last.
    static func text(at date: Date = Date()) -> String {
        let second = Int(date.timeIntervalSince1970.rounded(.down))
        if let text = Self.last.withLock({ $0.second == second ? $0.text : nil }) { return text }
        let text = HTTPDate.format(date)
        Self.last.withLock { $0 = (second, text) }
        return text
    }
}
