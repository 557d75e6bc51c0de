import Testing

@testable import CachalotServer

@Suite("ConnectionTable: which connection to close for a new one")
struct ConnectionTableTests {
    /// A table of connections named by their ids.
    typealias Table = ConnectionTable<Int, String>

    /// Admits `name` under `id`, and says what the table did: `admit`, `admit, closing <name>` or `refuse`.
    static func admit(_ id: Int, _ name: String, to table: inout Table) -> String {
        switch table.admit(id, name) {
        case .admit: "admit"
        case .admitClosing(let closed): "admit, closing \(closed)"
        case .refuse: "refuse"
        }
    }

    @Test("Below the limit every connection is admitted")
    func belowLimit() {
        var table = Table(limit: 2)
        let first = Self.admit(1, "a", to: &table)
        let second = Self.admit(2, "b", to: &table)
        #expect([first, second] == ["admit", "admit"])
        #expect(table.count == 2)
    }

    @Test("At the limit, the connection idle the longest is closed for the new one")
    func closesOldestIdle() {
        var table = Table(limit: 3)
        for (id, name) in [(1, "a"), (2, "b"), (3, "c")] { _ = Self.admit(id, name, to: &table) }
        // a answers a request and goes idle again after b and c became idle: b is now the oldest.
        let began = table.setBusy(1, true)
        let ended = table.setBusy(1, false)
        #expect(began && ended)
        let admissions = [(4, "d"), (5, "e"), (6, "f")].map { Self.admit($0.0, $0.1, to: &table) }
        #expect(admissions == ["admit, closing b", "admit, closing c", "admit, closing a"])
        #expect(table.count == 3)
    }

    @Test("A busy connection is never closed for a new one; with every connection busy, the new one is refused")
    func busyKept() {
        var table = Table(limit: 2)
        _ = Self.admit(1, "a", to: &table)
        _ = Self.admit(2, "b", to: &table)
        let aBusy = table.setBusy(1, true)
        let third = Self.admit(3, "c", to: &table)
        let cBusy = table.setBusy(3, true)
        let fourth = Self.admit(4, "d", to: &table)
        #expect(aBusy && cBusy)
        #expect(third == "admit, closing b")
        #expect(fourth == "refuse")
        #expect(table.count == 2)
    }

    @Test("A connection closed for another may not begin a request")
    func closedMayNotBegin() {
        var table = Table(limit: 1)
        _ = Self.admit(1, "a", to: &table)
        _ = Self.admit(2, "b", to: &table)
        let closedBegins = table.setBusy(1, true)
        let admittedBegins = table.setBusy(2, true)
        #expect(!closedBegins)
        #expect(admittedBegins)
    }

    @Test("Shutdown refuses new connections, hands back the idle ones, and lets no request begin")
    func shutdown() {
        var table = Table(limit: 4)
        _ = Self.admit(1, "a", to: &table)
        _ = Self.admit(2, "b", to: &table)
        let bBusy = table.setBusy(2, true)
        let idle = table.shutDown()
        let late = Self.admit(3, "c", to: &table)
        let bIdle = table.setBusy(2, false)
        #expect(bBusy)
        #expect(idle == ["a"])
        #expect(late == "refuse")
        #expect(!bIdle)
        table.remove(2)
        table.remove(1)
        #expect(table.count == 0)
    }
}
