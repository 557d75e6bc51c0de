import Foundation
import HTTPTypes
import Synchronization

extension ResourceLoader {
    /// Loads `urls` into the caches at `priority`, behind the loads that need their answers now.
    ///
    /// ```swift
    /// let prefetch = loader.prefetch(upcomingImageURLs)
    /// prefetch.setPriority(.high, for: url)  // it scrolled into view
    /// prefetch.cancel()                      // the list went away
    /// ```
    ///
    /// Prefetching a URL that is stored and fresh costs a memory or disk read and sends nothing.
    ///
    /// - Parameters:
    ///   - urls: The URLs to load with `GET`; repeats are loaded once.
    ///   - priority: Their priority among requests waiting for a host. Default: low.
    /// - Returns: A handle to cancel the prefetch, or change its priorities. Keep it: releasing
    ///   it cancels the loads that have not finished.
    public func prefetch(_ urls: [URL], priority: Priority = .low) -> Prefetch {
        Prefetch(loader: self, urls: urls, priority: priority)
    }
}

/// Loads that a ``ResourceLoader/prefetch(_:priority:)`` started: each can be cancelled, or
/// given another priority while it waits for its host.
public final class Prefetch: Sendable {
    private struct Item {
        var task: Task<Void, Never>?
        /// The run the load waits for and its number among the run's callers, once it waits.
        var waiting: (flight: FlightKey, caller: Int)?
    }

    /// The loads, by URL; a class of its own, so that the loads' tasks can hold it.
    private final class Items: Sendable {
        let state = Mutex<[URL: Item]>([:])
    }

    private let loader: ResourceLoader
    private let items = Items()

    init(loader: ResourceLoader, urls: [URL], priority: ResourceLoader.Priority) {
        self.loader = loader
        let items = self.items
        items.state.withLock { state in
            for url in urls where state[url] == nil {
                state[url] = Item()
                state[url]?.task = Task(priority: .utility) {
                    _ = try? await loader.load(
                        HTTPRequest(method: .get, url: url),
                        priority: priority,
                        onWaiting: { flight, caller in items.state.withLock { $0[url]?.waiting = (flight, caller) } }
                    )
                }
            }
        }
    }

    deinit {
        self.cancel()
    }

    /// Cancels every load of the prefetch that has not finished.
    public func cancel() {
        for item in self.items.state.withLock({ Array($0.values) }) { item.task?.cancel() }
    }

    /// Cancels the load of `url`, if the prefetch has one that has not finished.
    public func cancel(_ url: URL) {
        self.items.state.withLock { $0[url] }?.task?.cancel()
    }

    /// Changes the priority of the load of `url` while it waits for its host.
    public func setPriority(_ priority: ResourceLoader.Priority, for url: URL) {
        guard let waiting = self.items.state.withLock({ $0[url]?.waiting }) else { return }
        self.loader.flights.setPriority(priority.rawValue, key: waiting.flight, caller: waiting.caller)
    }

    /// Waits until every load of the prefetch has finished or been cancelled.
    public func wait() async {
        for item in self.items.state.withLock({ Array($0.values) }) { await item.task?.value }
    }
}
