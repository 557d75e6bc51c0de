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
        let thread = Thread { [self] in self.drain() }
        thread.name = "cachalot-access-log"
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
        while true {
            _ = self.wake.wait(timeout: .now() + .nanoseconds(Int(clamping: interval)))
            let (batch, dropped, isFinished) = self.state.withLock { state in
                defer {
                    state.pending = []
                    state.pendingBytes = 0
                    state.dropped = 0
                    state.isWoken = false
                }
                return (state.pending, state.dropped, state.isFinished)
            }
            if dropped > 0 {
                self.onDrop(dropped)
                self.logger.warning(
                    "Dropped access log lines: the output did not keep up",
                    metadata: ["lines": "\(dropped)"]
                )
            }
            if !batch.isEmpty {
                var bytes: [UInt8] = []
                bytes.reserveCapacity(batch.reduce(0) { $0 + $1.size })
                for record in batch { Self.append(record, as: self.configuration.format, clock: &clock, to: &bytes) }
                self.configuration.output(bytes)
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
        Self.append(record, as: format, clock: &clock, to: &bytes)
    }

    /// Appends `record`'s line, its time written with `clock`. Written as bytes, without a
    /// string made for any part: the log's thread writes a line for every request.
    static func append(
        _ record: AccessLogRecord,
        as format: AccessLog.Format,
        clock: inout LineClock,
        to bytes: inout [UInt8]
    ) {
        switch format.code {
        case .text:
            clock.append(record.time, to: &bytes)
            bytes.append(UInt8(ascii: " "))
            bytes += (record.client ?? "-").utf8
            bytes.append(UInt8(ascii: " "))
            self.appendVisible(record.method, to: &bytes)
            bytes.append(UInt8(ascii: " "))
            self.appendVisible(record.target, to: &bytes)
            self.appendFigures(record, labels: (" ", " bytes=", " ms="), to: &bytes)
            bytes += " cache=".utf8
            self.appendVisible(record.cacheStatus, to: &bytes, keepingSpaces: true)
        case .json:
            bytes += "{\"time\":\"".utf8
            clock.append(record.time, to: &bytes)
            bytes += "\",\"client\":".utf8
            if let client = record.client { self.appendJSONString(client, to: &bytes) } else { bytes += "null".utf8 }
            bytes += ",\"method\":".utf8
            self.appendJSONString(record.method, to: &bytes)
            bytes += ",\"target\":".utf8
            self.appendJSONString(record.target, to: &bytes)
            self.appendFigures(record, labels: (",\"status\":", ",\"bytes\":", ",\"ms\":"), to: &bytes)
            bytes += ",\"cache\":".utf8
            self.appendJSONString(record.cacheStatus, to: &bytes)
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(UInt8(ascii: "\n"))
    }

    /// The record's status, body bytes and milliseconds, each after its label in the format.
    private static func appendFigures(
        _ record: AccessLogRecord,
        labels: (status: StaticString, bytes: StaticString, milliseconds: StaticString),
        to bytes: inout [UInt8]
    ) {
        labels.status.withUTF8Buffer { bytes += $0 }
        self.appendDecimal(record.status, to: &bytes)
        labels.bytes.withUTF8Buffer { bytes += $0 }
        self.appendDecimal(record.bytes, to: &bytes)
        labels.milliseconds.withUTF8Buffer { bytes += $0 }
        self.appendMilliseconds(record.microseconds, to: &bytes)
    }

    /// `value` in decimal, with at least `digits` digits (zeros before).
    static func appendDecimal(_ value: some BinaryInteger, digits: Int = 1, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        // Written from the last digit, then turned around in place.
        let start = bytes.endIndex
        var magnitude = value.magnitude
        while magnitude > 0 || bytes.endIndex - start < digits {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        }
        var (low, high) = (start, bytes.endIndex - 1)
        while low < high {
            bytes.swapAt(low, high)
            (low, high) = (low + 1, high - 1)
        }
    }

    /// `microseconds` as milliseconds with three decimals: `1.234`.
    private static func appendMilliseconds(_ microseconds: Int64, to bytes: inout [UInt8]) {
        if microseconds < 0 { bytes.append(UInt8(ascii: "-")) }
        self.appendDecimal(microseconds.magnitude / 1_000, to: &bytes)
        bytes.append(UInt8(ascii: "."))
        self.appendDecimal(microseconds.magnitude % 1_000, digits: 3, to: &bytes)
    }

    /// `text` with control characters (and spaces, unless `keepingSpaces`) as `\xHH`, so that
    /// one field stays one field and one line one line.
    private static func appendVisible(_ text: String, to bytes: inout [UInt8], keepingSpaces: Bool = false) {
        for byte in text.utf8 {
            if byte < 0x20 || byte == 0x7F || (byte == 0x20 && !keepingSpaces) || byte == UInt8(ascii: "\\") {
                bytes += "\\x".utf8
                bytes.append(Self.hex[Int(byte >> 4)])
                bytes.append(Self.hex[Int(byte & 0xF)])
            } else {
                bytes.append(byte)
            }
        }
    }

    /// `text` as a JSON string (RFC 8259 §7): quoted, with `"`, `\` and control characters escaped.
    static func appendJSONString(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes += "\\\"".utf8
            case UInt8(ascii: "\\"): bytes += "\\\\".utf8
            case UInt8(ascii: "\n"): bytes += "\\n".utf8
            case UInt8(ascii: "\r"): bytes += "\\r".utf8
            case UInt8(ascii: "\t"): bytes += "\\t".utf8
            case 0..<0x20, 0x7F:
                bytes += "\\u00".utf8
                bytes.append(Self.hex[Int(byte >> 4)])
                bytes.append(Self.hex[Int(byte & 0xF)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hex = Array("0123456789abcdef".utf8)
}

/// Writes a line's time, `2026-11-26T11:07:05.412Z`, its date and time of day made once a
/// second: lines come in the order they were answered, many in each second.
struct LineClock {
    private var second: time_t?
    /// `2026-11-26T11:07:05.` for ``second``.
    private var written: [UInt8] = []

    mutating func append(_ seconds: Double, to bytes: inout [UInt8]) {
        let whole = time_t(seconds.rounded(.down))
        if whole != self.second {
            self.second = whole
            var time = whole
            var parts = tm()
            gmtime_r(&time, &parts)
            self.written.removeAll(keepingCapacity: true)
            AccessLogWriter.appendDecimal(parts.tm_year + 1_900, digits: 4, to: &self.written)
            self.written.append(UInt8(ascii: "-"))
            AccessLogWriter.appendDecimal(parts.tm_mon + 1, digits: 2, to: &self.written)
            self.written.append(UInt8(ascii: "-"))
            AccessLogWriter.appendDecimal(parts.tm_mday, digits: 2, to: &self.written)
            self.written.append(UInt8(ascii: "T"))
            AccessLogWriter.appendDecimal(parts.tm_hour, digits: 2, to: &self.written)
            self.written.append(UInt8(ascii: ":"))
            AccessLogWriter.appendDecimal(parts.tm_min, digits: 2, to: &self.written)
            self.written.append(UInt8(ascii: ":"))
            AccessLogWriter.appendDecimal(parts.tm_sec, digits: 2, to: &self.written)
            self.written.append(UInt8(ascii: "."))
        }
        bytes += self.written
        let milliseconds = min(999, max(0, Int((seconds - seconds.rounded(.down)) * 1_000)))
        AccessLogWriter.appendDecimal(milliseconds, digits: 3, to: &bytes)
        bytes.append(UInt8(ascii: "Z"))
    }
}
