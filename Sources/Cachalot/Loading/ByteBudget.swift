import Foundation
import Synchronization

/// The bytes of bodies from the network that a loader holds in memory at once, against a limit:
/// past it, bodies being stored go to their file of the disk tier from their next piece, and a
/// shared body keeps in memory no more of what is in its file than its readers still need from
/// memory (see ``ResourceLoader/Configuration/inFlightBodyLimit``).
final class ByteBudget: Sendable {
    /// The limit; `nil` for none.
    let limit: Int?
    private let held = Atomic(0)

    init(limit: Int?) {
        self.limit = limit
    }

    /// The bytes held now.
    var bytes: Int {
        self.held.load(ordering: .relaxed)
    }

    /// Whether more than the limit is held.
    var isExceeded: Bool {
        guard let limit = self.limit else { return false }
        return self.bytes > limit
    }

    func take(_ count: Int) {
        self.held.add(count, ordering: .relaxed)
    }

    func give(_ count: Int) {
        self.held.subtract(count, ordering: .relaxed)
    }
}

/// Body bytes held in memory, counted against a ``ByteBudget`` for as long as they are held:
/// until they are taken out, or this is freed (a reader that stopped midway).
final class HeldBytes {
    private let budget: ByteBudget
    private(set) var data = Data()
    /// Whether room was reserved in ``data``, which a first piece kept as it is would let go.
    private var isReserved = false

    init(budget: ByteBudget) {
        self.budget = budget
    }

    deinit {
        self.budget.give(self.data.count)
    }

    var count: Int {
        self.data.count
    }

    var isEmpty: Bool {
        self.data.isEmpty
    }

    func reserveCapacity(_ count: Int) {
        self.data.reserveCapacity(count)
        self.isReserved = true
    }

    /// Adds `piece`. A first piece is held as it is, its bytes shared and not copied (a body
    /// from a kept-alive connection most often comes in one), unless room was reserved.
    func append(_ piece: Data) {
        if self.data.isEmpty, !self.isReserved, piece.startIndex == 0 {
            self.data = piece
        } else {
            self.data.append(piece)
        }
        self.budget.take(piece.count)
    }

    /// Holds `data` instead of what was held.
    func replace(with data: Data) {
        self.budget.give(self.data.count)
        self.data = data
        self.budget.take(data.count)
    }

    /// The bytes, no longer held or counted.
    func take() -> Data {
        let data = self.data
        self.budget.give(data.count)
        self.data = Data()
        return data
    }
}
