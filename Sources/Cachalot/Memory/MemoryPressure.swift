/// How urgently the system asks processes to give memory back.
public enum MemoryPressure: Hashable, Sendable {
    /// Memory is getting low: a ``MemoryCache`` drops half of its cost.
    case warning
    /// Memory is critically low: a ``MemoryCache`` drops everything.
    case critical
}

#if canImport(Darwin)
import Dispatch
import Synchronization

/// Forwards Dispatch's memory-pressure events to every cache that registered for them.
///
/// One Dispatch source serves the whole process; caches register once they are fully made and
/// unregister when they go away.
final class MemoryPressureNotifier: Sendable {
    static let shared = MemoryPressureNotifier()

    private let handlers = Mutex<[ObjectIdentifier: @Sendable (MemoryPressure) -> Void]>([:])
    // A Dispatch source is thread-safe; it is only resumed here and never changed afterwards.
    private nonisolated(unsafe) let source: any DispatchSourceMemoryPressure

    private init() {
        let source = DispatchSource.makeMemoryPressureSource(eventMask: [.warning, .critical], queue: .global())
        self.source = source
        source.setEventHandler { [handlers] in
            let pressure: MemoryPressure = source.data.contains(.critical) ? .critical : .warning
            for handler in handlers.withLock({ Array($0.values) }) {
                handler(pressure)
            }
        }
        source.resume()
    }

    func register(_ id: ObjectIdentifier, handler: @escaping @Sendable (MemoryPressure) -> Void) {
        self.handlers.withLock { $0[id] = handler }
    }

    func unregister(_ id: ObjectIdentifier) {
        _ = self.handlers.withLock { $0.removeValue(forKey: id) }
    }
}
#endif
