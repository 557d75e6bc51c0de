import Foundation
import HTTPTypes

/// A request decided as far as it can be without waiting: its key computed, what is stored for
/// it looked up, its step chosen (``ResourceLoader/prepare(_:policy:readsDisk:)``).
///
/// A server prepares a request once, on the thread that read it: if the cache answers it at
/// once (``answer``), it answers there; otherwise it hands the prepared value on to a task that
/// may wait, which resumes it with ``ResourceLoader/stream(_:body:priority:interim:)`` without
/// converting, keying or looking anything up again.
public struct PreparedLoad: Sendable {
    /// The request prepared.
    public let request: HTTPRequest
    /// The policy it was prepared under: `nil` for the loader's.
    let policy: CachePolicy?
    /// Its key.
    let key: ResponseKey
    /// Its step, or `nil` if only memory was read, it held nothing to decide by, and the disk
    /// has a file for the key (``DataCaching/mayContain(_:)``): the disk is read when the load
    /// resumes.
    let step: LoadPlan.Step?

    /// The answer the cache gives at once, without waiting on anything: a fresh stored response,
    /// a stale one that the rules or the policy allow (its background revalidation started, if
    /// `stale-while-revalidate` asks for one), or the 504 of
    /// ``CachePolicy/returnCacheDataDontLoad`` when no shared tier may hold the response. `nil`
    /// when the answer needs the network or a shared tier, or is a redirect the loader follows.
    public let answer: Resource?

    init(request: HTTPRequest, policy: CachePolicy?, key: ResponseKey, step: LoadPlan.Step?, followsRedirects: Bool) {
        self.request = request
        self.policy = policy
        self.key = key
        self.step = step
        if let resource = step?.answer, !followsRedirects || !Redirect.isFollowed(resource.statusCode) {
            self.answer = resource
        } else {
            self.answer = nil
        }
    }
}
