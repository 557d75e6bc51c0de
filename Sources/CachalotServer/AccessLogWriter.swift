import CCachalotCore
import Cachalot
import Dispatch
import Foundation
import Logging
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One answered request, as the access log writes it: gathered on the event loop, formatted on
/// the writer's thread.
struct AccessLogRecord: Sendable {
    /// Seconds since 1970, when the response was sent.
    var time: Double
    /// The client's IP address as text.
    var client: String?
    var method: String
    var target: String
    var status: Int
    var bytes: Int
    var microseconds: Int64
    var cacheStatus: String

    /// About the bytes its line takes: what the buffer's bound counts.
    var size: Int { self.method.utf8.count + self.target.utf8.count + self.cacheStatus.utf8.count + 128 }
}

/// Writes an ``AccessLog``'s lines on a thread of its own: ``append(_:)`` only adds to a bounded
/// buffer under a lock, and drops the line when the buffer is full, so that an event loop never
/// waits on the output.
///
/// The thread wakes every ``AccessLog/flushInterval`` (or when the buffer is half full), takes
/// what waits, and writes it in one batch; ``finish()`` writes what is left and ends the thread.
final class AccessLogWriter: Sendable {
    private struct State {
        var pending: [AccessLogRecord] = []
        var pendingBytes = 0
        var dropped = 0
        /// Whether the thread was woken for a buffer half full since it last took the buffer.
        var isWoken = false
        var isStarted = false
        var isFinished = false
        var hasExited = false
        var exitWaiter: CheckedContinuation<Void, Never>?
    }

    let configuration: AccessLog
    private let logger: Logger
    private let onDrop: @Sendable (Int) -> Void
    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - configuration: The format, the bound, the interval and the output.
    ///   - logger: Where drops are reported, at warning.
    ///   - onDrop: Counts lines dropped, with how many since the last batch.
    init(_ configuration: AccessLog, logger: Logger, onDrop: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.configuration = configuration
        self.logger = logger
        self.onDrop = onDrop
    }

    /// Adds a line to the buffer, or drops it if the buffer is full or the writer has finished.
    func append(_ record: AccessLogRecord) {
        let limit = self.configuration.bufferSize
        let wakes = self.state.withLock { state in
            let size = record.size
            guard !state.isFinished, state.pendingBytes + size <= limit else {
                state.dropped += 1
                return false
            }
            state.pending.append(record)
            state.pendingBytes += size
            guard !state.isWoken, state.pendingBytes * 2 >= limit else { return false }
            state.isWoken = true
            return true
        }
        if wakes { self.wake.signal() }
    }

    /// Starts the thread that writes.
    func start() {
        self.state.withLock { $0.isStarted = true }
        let thread = Thread { [self] in
            // Named by itself, as the image workers are: Foundation on Linux gives the system no
            // name set before the start, and the thread would keep that of the one that started it.
            cachalot_name_this_thread("access-log")
            self.drain()
        }
        thread.start()
    }

    /// Writes what waits, ends the thread, and returns once it has ended. Lines appended after
    /// are dropped.
    func finish() async {
        let isStarted = self.state.withLock { state in
            state.isFinished = true
            return state.isStarted
        }
        self.wake.signal()
        guard isStarted else { return }
        await withCheckedContinuation { continuation in
            let hasExited = self.state.withLock { state in
                if !state.hasExited { state.exitWaiter = continuation }
                return state.hasExited
            }
            if hasExited { continuation.resume() }
        }
    }

    /// The thread's loop.
    private func drain() {
        let interval = TimeAmount(self.configuration.flushInterval).nanoseconds
        var clock = LineClock()
        // Swapped with the buffer's array, so that each keeps its capacity from one batch to the
        // next: the event loops' appends then grow no array between batches of the same size.
        var batch: [AccessLogRecord] = []
        while true {
            _ = self.wake.wait(timeout: .now() + .nanoseconds(Int(clamping: interval)))
            let (dropped, isFinished) = self.state.withLock { state in
                swap(&batch, &state.pending)
                defer {
                    state.pendingBytes = 0
                    state.dropped = 0
                    state.isWoken = false
                }
                return (state.dropped, state.isFinished)
            }
            if dropped > 0 {
                self.onDrop(dropped)
                self.logger.warning(
                    "Dropped access log lines: the output did not keep up",
                    metadata: ["lines": "\(dropped)"]
                )
            }
            if !batch.isEmpty {
                self.configuration.output(Self.lines(of: batch, as: self.configuration.format, clock: &clock))
                batch.removeAll(keepingCapacity: true)
            }
            if isFinished { break }
        }
        let waiter = self.state.withLock { state in
            state.hasExited = true
            defer { state.exitWaiter = nil }
            return state.exitWaiter
        }
        waiter?.resume()
    }

    // MARK: - Formatting

    /// Appends `record`'s line, with its newline, in `format`.
    static func append(_ record: AccessLogRecord, as format: AccessLog.Format, to bytes: inout [UInt8]) {
        var clock = LineClock()
        bytes += Self.lines(of: [record], as: format, clock: &clock)
    }

    /// The lines of `records`, each with its newline, their times written with `clock`: written
    /// into one array sized beforehand for the longest they could be, without a string made for
    /// any part and without a check of the array's room or ownership per part, since the log's
    /// thread writes a line for every request. The array's room is at most six times the bytes
    /// the records count against ``AccessLog/bufferSize``, and most of it is never touched.
    static func lines(of records: [AccessLogRecord], as format: AccessLog.Format, clock: inout LineClock) -> [UInt8] {
        let bound = records.reduce(0) { $0 + Self.longestLine(of: $1) }
        return [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
            var writer = ByteWriter(buffer)
            for record in records { Self.write(record, as: format, clock: &clock, into: &writer) }
            count = writer.count
        }
    }

    /// The most bytes `record`'s line can take in either format: each byte of its strings
    /// escaped as six (`\u00HH`), and room for the rest at its longest (the time, the labels and
    /// three figures of at most 20 digits and a sign each).
    private static func longestLine(of record: AccessLogRecord) -> Int {
        let strings =
            (record.client?.utf8.count ?? 0) + record.method.utf8.count + record.target.utf8.count
            + record.cacheStatus.utf8.count
        return 6 * strings + 256
    }

    /// Writes `record`'s line, with its newline.
    private static func write(
        _ record: AccessLogRecord,
        as format: AccessLog.Format,
        clock: inout LineClock,
        into writer: inout ByteWriter
    ) {
        switch format.code {
        case .text:
            clock.write(record.time, into: &writer)
            writer.write(byte: UInt8(ascii: " "))
            writer.write(record.client ?? "-")
            writer.write(byte: UInt8(ascii: " "))
            Self.writeVisible(record.method, into: &writer)
            writer.write(byte: UInt8(ascii: " "))
            Self.writeVisible(record.target, into: &writer)
            Self.writeFigures(record, labels: (" ", " bytes=", " ms="), into: &writer)
            writer.write(" cache=")
            Self.writeVisible(record.cacheStatus, keepingSpaces: true, into: &writer)
        case .json:
            writer.write("{\"time\":\"")
            clock.write(record.time, into: &writer)
            writer.write("\",\"client\":")
            if let client = record.client { Self.writeJSONString(client, into: &writer) } else { writer.write("null") }
            writer.write(",\"method\":")
            Self.writeJSONString(record.method, into: &writer)
            writer.write(",\"target\":")
            Self.writeJSONString(record.target, into: &writer)
            Self.writeFigures(record, labels: (",\"status\":", ",\"bytes\":", ",\"ms\":"), into: &writer)
            writer.write(",\"cache\":")
            Self.writeJSONString(record.cacheStatus, into: &writer)
            writer.write(byte: UInt8(ascii: "}"))
        }
        writer.write(byte: UInt8(ascii: "\n"))
    }

    /// The record's status, body bytes and milliseconds, each after its label in the format.
    private static func writeFigures(
        _ record: AccessLogRecord,
        labels: (status: StaticString, bytes: StaticString, milliseconds: StaticString),
        into writer: inout ByteWriter
    ) {
        writer.write(labels.status)
        writer.write(decimal: record.status)
        writer.write(labels.bytes)
        writer.write(decimal: record.bytes)
        writer.write(labels.milliseconds)
        // `microseconds` as milliseconds with three decimals: `1.234`.
        if record.microseconds < 0 { writer.write(byte: UInt8(ascii: "-")) }
        let microseconds = record.microseconds.magnitude
        writer.write(decimal: Int(microseconds / 1_000))
        writer.write(byte: UInt8(ascii: "."))
        writer.write(decimal: Int(microseconds % 1_000), digits: 3)
    }

    /// `text` with control characters (and spaces, unless `keepingSpaces`) as `\xHH`, so that
    /// one field stays one field and one line one line.
    private static func writeVisible(_ text: String, keepingSpaces: Bool = false, into writer: inout ByteWriter) {
        var text = text
        text.withUTF8 { utf8 in
            // The runs between bytes to escape go whole: nearly every target has none.
            var start = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == 0x7F || (byte == 0x20 && !keepingSpaces) || byte == UInt8(ascii: "\\")
                else { continue }
                writer.write(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8[start..<index])))
                writer.write("\\x")
                Self.writeHex(byte, into: &writer)
                start = index + 1
            }
            writer.write(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8[start...])))
        }
    }

    /// `text` as a JSON string (RFC 8259 §7): quoted, with `"`, `\` and control characters escaped.
    private static func writeJSONString(_ text: String, into writer: inout ByteWriter) {
        writer.write(byte: UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var start = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
                else { continue }
                writer.write(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8[start..<index])))
                switch byte {
                case UInt8(ascii: "\""): writer.write("\\\"")
                case UInt8(ascii: "\\"): writer.write("\\\\")
                case UInt8(ascii: "\n"): writer.write("\\n")
                case UInt8(ascii: "\r"): writer.write("\\r")
                case UInt8(ascii: "\t"): writer.write("\\t")
                default:
                    writer.write("\\u00")
                    Self.writeHex(byte, into: &writer)
                }
                start = index + 1
            }
            writer.write(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8[start...])))
        }
        writer.write(byte: UInt8(ascii: "\""))
    }

    /// `byte` as two lowercase hexadecimal digits.
    private static func writeHex(_ byte: UInt8, into writer: inout ByteWriter) {
        let digits: StaticString = "0123456789abcdef"
        digits.withUTF8Buffer { digits in
            writer.write(byte: digits[Int(byte >> 4)])
            writer.write(byte: digits[Int(byte & 0xF)])
        }
    }
}

/// Writes a line's time, `2026-11-26T11:07:05.412Z`, its date and time of day made once a
/// second: lines come in the order they were answered, many in each second.
struct LineClock {
    private var second: time_t?
    /// `2026-11-26T11:07:05.` for ``second``.
    private var written: [UInt8] = []

    /// Writes the time `seconds` after 1970: 24 bytes (more only past the year 9999).
    mutating func write(_ seconds: Double, into writer: inout ByteWriter) {
        let whole = time_t(seconds.rounded(.down))
        if whole != self.second {
            self.second = whole
            var time = whole
            var parts = tm()
            gmtime_r(&time, &parts)
            // Room for any year `tm` holds.
            self.written = [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
                var date = ByteWriter(buffer)
                date.write(decimal: Int(parts.tm_year) + 1_900, digits: 4)
                date.write("-")
                date.write(decimal: Int(parts.tm_mon) + 1, digits: 2)
                date.write("-")
                date.write(decimal: Int(parts.tm_mday), digits: 2)
                date.write("T")
                date.write(decimal: Int(parts.tm_hour), digits: 2)
                date.write(":")
                date.write(decimal: Int(parts.tm_min), digits: 2)
                date.write(":")
                date.write(decimal: Int(parts.tm_sec), digits: 2)
                date.write(".")
                count = date.count
            }
        }
        self.written.withUnsafeBytes { writer.write($0) }
        let milliseconds = min(999, max(0, Int((seconds - seconds.rounded(.down)) * 1_000)))
        writer.write(decimal: milliseconds, digits: 3)
        writer.write(byte: UInt8(ascii: "Z"))
    }
}
