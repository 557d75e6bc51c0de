import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A small number for the calling thread, handed out in turn when a thread first asks and the
/// same on every later call. Threads numbered apart can keep apart per-thread counters.
@usableFromInline
enum ThreadNumber {
    /// The thread-specific key that holds the number; `nil` if the process has no key left, in
    /// which case every thread is number 0 (still correct, only slower under contention).
    @usableFromInline
    static let key: pthread_key_t? = {
        var key = pthread_key_t()
        return pthread_key_create(&key, nil) == 0 ? key : nil
    }()
    private static let next = Atomic<Int>(1)

    /// The calling thread's number: from 1 up, or 0 if no thread-specific key was available.
    @inlinable
    static var current: Int {
        guard let key = self.key else { return 0 }
        if let stored = pthread_getspecific(key) {
            return Int(bitPattern: stored)
        }
        return self.assign(key)
    }

    /// Gives the calling thread the next number.
    @usableFromInline
    static func assign(_ key: pthread_key_t) -> Int {
        let number = self.next.wrappingAdd(1, ordering: .relaxed).oldValue
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: number))
        return number
    }
}
