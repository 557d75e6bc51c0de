import Foundation
import HTTPTypes

/// A loaded resource: its body, its response head, and where the answer came from.
public struct Resource: Sendable {
    /// The body.
    public var body: Data
    /// Where the answer came from.
    public var source: Source
    /// The URLs of the redirects the load followed, in order: the last is the URL that gave
    /// this answer. Empty when the request's own URL answered.
    public var redirects: [URL] = []
    /// Why the request went to the origin; `nil` when it did not (a fresh hit, a stale answer
    /// that `max-stale`, `stale-while-revalidate` or the policy allowed, a generated 504).
    public var forwardReason: ForwardReason?
    /// How many more seconds a stored answer stays fresh (negative once stale); `nil` for an
    /// answer that was not stored.
    public var timeToLive: Int?
    private var head: Head

    /// The head as given, or a stored response and its `Age`, made into the head when it is
    /// read: most callers of a hit want only the body, and the head of a disk hit is decoded
    /// only when it is first read.
    private enum Head: Sendable {
        case response(HTTPResponse)
        case stored(StoredResponse, age: Int)
    }

    /// The status and header fields. An answer from the cache carries `Age` (RFC 9111 §5.1).
    public var response: HTTPResponse {
        get {
            switch self.head {
            case .response(let response):
                return response
            case .stored(let stored, let age):
                var response = stored.response
                response.headerFields[.age] = String(age)
                return response
            }
        }
        set {
            self.head = .response(newValue)
        }
    }

    /// The `Age` the cache gives an answer it stored (RFC 9111 §5.1), which ``response``
    /// carries; `nil` for an answer whose head was given as it is.
    public var age: Int? {
        switch self.head {
        case .response: nil
        case .stored(_, let age): age
        }
    }

    /// `make`'s value for the head: ``response`` without the `Age` of ``age``.
    ///
    /// For an answer from a stored response, the value is made the first time a value of type
    /// `T` is asked for, and kept with the stored response while the cache holds it: every
    /// later hit of it gets the same value without making the head again. A server keeps the
    /// header fields it writes for a stored response this way, and adds only what changes from
    /// one hit to the next (`Age`, say). Keep to one type `T` per cache, and to values that
    /// depend on the head alone: a value of another type takes the place of the one kept. The
    /// value is not counted in the memory tier's cost. For any other answer, `make` runs each
    /// time.
    @inlinable
    public func derivedFromHead<T: Sendable>(_ make: (HTTPResponse) -> T) -> T {
        // Inlined where it is called, so that the cast is to a type known there: unspecialized,
        // it looked the optional's type up at run time on every hit.
        // Unwrapped first: `nil` cast to an optional `T` would succeed.
        if let kept = self.derivedValue, let value = kept as? T { return value }
        let value = make(self.derivationHead)
        self.keepDerivedValue(value)
        return value
    }

    /// The value kept with the stored response this answer came from, if any.
    @usableFromInline
    var derivedValue: (any Sendable)? {
        switch self.head {
        case .response: nil
        case .stored(let stored, _): stored.derivedValue
        }
    }

    /// The head ``derivedFromHead(_:)`` makes a value from: ``response`` without the `Age` of ``age``.
    @usableFromInline
    var derivationHead: HTTPResponse {
        switch self.head {
        case .response(let response): response
        case .stored(let stored, _): stored.headWithoutAge
        }
    }

    /// Keeps `value` with the stored response this answer came from; nothing for another answer.
    @usableFromInline
    func keepDerivedValue(_ value: any Sendable) {
        if case .stored(let stored, _) = self.head { stored.keepDerivedValue(value) }
    }

    /// The status code, read without making the head (or decoding a stored one).
    public var statusCode: Int {
        switch self.head {
        case .response(let response): response.status.code
        case .stored(let stored, _): stored.statusCode
        }
    }

    /// Creates a resource.
    public init(body: Data, response: HTTPResponse, source: Source) {
        self.body = body
        self.head = .response(response)
        self.source = source
    }

    /// A resource answered from the cache, `age` seconds old, fresh for `timeToLive` more.
    init(body: Data, stored: StoredResponse, age: Int, timeToLive: Int, source: Source) {
        self.body = body
        self.head = .stored(stored, age: age)
        self.source = source
        self.timeToLive = timeToLive
    }

    /// Why a request went to the origin, in the terms of the `fwd` parameter of RFC 9211's
    /// `Cache-Status`.
    public enum ForwardReason: String, Sendable, Hashable {
        /// Nothing was stored for the request's URL.
        case uriMiss = "uri-miss"
        /// Responses were stored for the request's URL, but none for the values of the
        /// request's fields that their `Vary` names.
        case varyMiss = "vary-miss"
        /// Nothing could be used, and the loader cannot tell why: reading the cache failed.
        case miss
        /// A fresh stored response was found, but the request's directives (`no-cache`,
        /// `max-age`, `min-fresh`) forbade using it without validation.
        case request
        /// The stored response was stale, or its own `no-cache` demands validation.
        case stale
        /// The method's semantics require the origin (anything but `GET`).
        case method
        /// The cache policy said to ignore what is stored
        /// (``CachePolicy/reloadIgnoringCacheData``).
        case bypass
    }

    /// Where an answer came from.
    public enum Source: Sendable, Hashable {
        /// A fresh response from the memory tier.
        case memory
        /// A fresh response from the disk tier.
        case disk
        /// A fresh response from a shared tier (see ``AsyncDataCaching``).
        case shared
        /// The origin's response, with nothing stored that could be used or validated.
        case network
        /// A stored response the origin confirmed with 304 (Not Modified).
        case revalidated
        /// A stale stored response, and what allowed it.
        case stale(StaleReason)
        /// An answer the loader made itself: the 504 (Gateway Timeout) of `only-if-cached`, or
        /// of ``CachePolicy/returnCacheDataDontLoad`` with nothing stored.
        case generated
    }
}

/// Why a load failed.
public struct LoadError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case invalidRequest, transport, incompleteBody, storage, invalidResponse
        }
        private let base: Base

        /// The request has no absolute `http` or `https` URL.
        public static let invalidRequest = Code(base: .invalidRequest)
        /// The transport failed before a whole response arrived; see ``LoadError/underlying``.
        public static let transport = Code(base: .transport)
        /// The body ended before the length its `Content-Length` announced.
        public static let incompleteBody = Code(base: .incompleteBody)
        /// Writing a large body to the disk tier as it arrived failed (the disk is full, or the
        /// directory cannot be written); see ``LoadError/underlying``.
        public static let storage = Code(base: .storage)
        /// The origin's answer breaks HTTP in a way no answer can be made of: a status outside
        /// 200–599, or a 304 (Not Modified) to a request that had nothing to validate. It is
        /// never stored.
        public static let invalidResponse = Code(base: .invalidResponse)

        /// The code's name, such as `transport`.
        public var description: String { "\(self.base)" }
    }

    /// The kind of failure.
    public var code: Code
    /// What happened and what to do about it.
    public var message: String
    /// The transport's error, for ``Code/transport``, or the disk tier's, for ``Code/storage``;
    /// `nil` for the other codes.
    public var underlying: (any Error)?

    /// Creates an error; transports may throw one too.
    ///
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - message: What happened and what to do about it.
    ///   - underlying: The transport's error. Default: `nil`.
    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    /// `LoadError.<code>: <message>`.
    public var description: String {
        "LoadError.\(self.code): \(self.message)"
    }
}
