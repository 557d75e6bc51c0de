import Cachalot
import CachalotTestOrigin
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Synchronization
import Testing

@testable import CachalotNIO

@Suite("OriginExchange: one exchange's heads and body, from the event loop to its reader", .timeLimit(.minutes(1)))
struct OriginExchangeTests {
    /// What an exchange asked of its connection, in order.
    final class Demands: Sendable {
        private let made = Mutex<[OriginExchange.Demand]>([])

        func append(_ demand: OriginExchange.Demand) {
            self.made.withLock { $0.append(demand) }
        }

        var all: [OriginExchange.Demand] {
            self.made.withLock { $0 }
        }
    }

    /// An exchange whose demands of the connection are recorded, as exchange 7 of its connection.
    static func exchange() -> (OriginExchange, Demands) {
        let demands = Demands()
        let exchange = OriginExchange(passesInterims: true) { demand, number in
            #expect(number == 7)
            demands.append(demand)
        }
        exchange.started(as: 7)
        return (exchange, demands)
    }

    static func head(_ code: Int) -> HTTPResponseHead {
        HTTPResponseHead(version: .http1_1, status: .init(statusCode: code))
    }

    static func piece(_ byte: UInt8) -> ByteBuffer {
        ByteBuffer(bytes: [byte])
    }

    @Test("interim heads come before the final one, in order; a failure before the final head fails the head")
    func heads() async throws {
        let (exchange, _) = Self.exchange()
        exchange.exchangeDidReceiveInterim(Self.head(103))
        exchange.exchangeDidReceiveInterim(Self.head(102))
        exchange.exchangeDidFail(HTTPTransportError(.responseTimeout, "none"))
        var codes: [UInt] = []
        for _ in 0..<2 {
            guard case .interim(let head) = try await exchange.nextHead() else { break }
            codes.append(head.status.code)
        }
        #expect(codes == [103, 102])
        await #expect { _ = try await exchange.nextHead() } throws: { error in
            (error as? HTTPTransportError)?.code == .responseTimeout
        }
    }

    @Test("at most 16 interim heads are passed on, and none to a reader that wants none")
    func interimLimit() async throws {
        for passes in [true, false] {
            let exchange = OriginExchange(passesInterims: passes) { _, _ in }
            for _ in 0..<20 { exchange.exchangeDidReceiveInterim(Self.head(103)) }
            exchange.exchangeDidReceiveHead(Self.head(200))
            var interims = 0
            while case .interim = try await exchange.nextHead() { interims += 1 }
            #expect(interims == (passes ? 16 : 0))
        }
    }

    @Test("reading from the origin stops at 16 waiting pieces and resumes once 4 wait; the pieces come in order")
    func backPressure() async throws {
        let (exchange, demands) = Self.exchange()
        exchange.exchangeDidReceiveHead(Self.head(200))
        guard case .final = try await exchange.nextHead() else { throw CancellationError() }
        let goesOn = (0..<16).map { exchange.exchangeDidReceiveBody(Self.piece(UInt8($0))) }
        #expect(goesOn == Array(repeating: true, count: 15) + [false])
        var iterator = OriginBody(exchange).makeAsyncIterator()
        var read: [UInt8] = []
        for _ in 0..<11 { read.append(try await iterator.next()?.getInteger(at: 0) ?? 255) }
        #expect(demands.all.isEmpty)
        read.append(try await iterator.next()?.getInteger(at: 0) ?? 255)
        #expect(demands.all == [.more])
        exchange.exchangeDidFinish()
        while let piece = try await iterator.next() { read.append(piece.getInteger(at: 0) ?? 255) }
        #expect(read == Array(0..<16))
        #expect(demands.all == [.more])
    }

    @Test("a body dropped before its end tells the connection to stop; one read to its end does not")
    func droppedBody() async throws {
        for readsToTheEnd in [false, true] {
            let (exchange, demands) = Self.exchange()
            exchange.exchangeDidReceiveHead(Self.head(200))
            _ = exchange.exchangeDidReceiveBody(Self.piece(1))
            do {
                var iterator = OriginBody(exchange).makeAsyncIterator()
                #expect(try await iterator.next() != nil)
                if readsToTheEnd {
                    exchange.exchangeDidFinish()
                    #expect(try await iterator.next() == nil)
                }
            }
            #expect(demands.all == (readsToTheEnd ? [] : [.none]))
            // The connection's next pieces are nobody's: reading stops.
            #expect(exchange.exchangeDidReceiveBody(Self.piece(2)) == false)
        }
    }

    @Test("a failure after the head breaks the body after the pieces that came before it")
    func brokenBody() async throws {
        let (exchange, _) = Self.exchange()
        exchange.exchangeDidReceiveHead(Self.head(200))
        _ = exchange.exchangeDidReceiveBody(Self.piece(1))
        exchange.exchangeDidFail(HTTPTransportError(.idleTimeout, "silent"))
        var iterator = OriginBody(exchange).makeAsyncIterator()
        #expect(try await iterator.next()?.getInteger(at: 0) == UInt8(1))
        await #expect { _ = try await iterator.next() } throws: { error in
            (error as? HTTPTransportError)?.code == .idleTimeout
        }
    }

    @Test("a reader cancelled while it waits for a piece stops with CancellationError and tells the connection to stop")
    func cancelledReader() async throws {
        let (exchange, demands) = Self.exchange()
        exchange.exchangeDidReceiveHead(Self.head(200))
        let body = OriginBody(exchange)
        let reading = Task {
            for try await _ in body {}
        }
        while !exchange.isWaiting { await Task.yield() }
        reading.cancel()
        await #expect(throws: CancellationError.self) { try await reading.value }
        #expect(demands.all == [.none])
    }

    @Test("through NIOTransport, a body dropped or a reader cancelled before the end closes the origin's connection")
    func closesTheConnection() async throws {
        for cancels in [false, true] {
            let origin = try await RawOrigin.start { _ in
                .init("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab", staysOpen: true)
            }
            defer { origin.stop() }
            let transport = NIOTransport()
            defer { transport.shutDown() }
            do {
                let reply = try await transport.send(HTTPRequest(url: origin.url("/stalls")), body: nil)
                if cancels {
                    let (firstPiece, arrived) = AsyncStream.makeStream(of: Data.self)
                    let reading = Task {
                        for try await piece in reply.body { arrived.yield(piece) }
                    }
                    for await piece in firstPiece {
                        #expect(piece == Data("ab".utf8))
                        break
                    }
                    reading.cancel()
                    await #expect(throws: CancellationError.self) { try await reading.value }
                }
            }
            // Dropped here, unread or cancelled: the connection closes, since the rest of the
            // body would stand before the next response. Without it this waits out the limit.
            await origin.closed(connection: 0)
        }
    }
}
