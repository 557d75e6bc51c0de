import Foundation
import HTTPTypes
import Logging

/// The one pipeline that `load` and `stream` share: a step decided (``LoadPlan``), the shared
/// tiers asked, a flight to the origin joined or started, redirects followed. Loads and streams
/// differ only in what their flight delivers: a body read whole, or a body to read as it arrives.
extension ResourceLoader {
    /// What a caller wants of an answer from the network.
    enum Delivery {
        /// The body read whole (`load`), telling `progress` how much has arrived, and
        /// `onWaiting` which flight the caller waits for.
        case whole(
            (@Sendable (LoadProgress) -> Void)?,
            (@Sendable (_ flight: FlightKey, _ caller: Int) -> Void)?
        )
        /// The body to read as it arrives (`stream`), with the interim responses of the request
        /// the caller sends.
        case streamed(Interim?)

        var interim: Interim? {
            guard case .streamed(let interim) = self else { return nil }
            return interim
        }
    }

    /// Answers `prepared`, and follows the redirects of its answer, up to
    /// ``Configuration/maximumRedirects``: each hop is a load of its own, prepared, answered
    /// from the cache or the network and stored by its own rules under its own URL.
    func answer(
        _ prepared: PreparedLoad,
        body: Data?,
        priority: Priority,
        delivery: Delivery
    ) async throws -> ResourceStream {
        var (prepared, body) = (prepared, body)
        var redirects: [URL] = []
        while true {
            var answer = try await self.hop(prepared, body: body, priority: priority, delivery)
            let request = prepared.request
            guard redirects.count < self.configuration.maximumRedirects,
                Redirect.isFollowed(answer.response.status.code),
                let next = Redirect.request(following: answer.response, to: request, body: body),
                let url = next.request.url
            else {
                answer.redirects = redirects
                return answer
            }
            // The redirect's own body is read (and so stored, if it may be), up to a bound.
            try await answer.drainRedirect(from: request.url)
            redirects.append(url)
            let policy = prepared.policy
            prepared = try await withBlockingAllowed { try self.prepare(next.request, policy: policy) }
            body = next.body
        }
    }

    /// One hop: `prepared` answered from the cache, the shared tiers or the network.
    private func hop(
        _ prepared: PreparedLoad,
        body: Data?,
        priority: Priority,
        _ delivery: Delivery
    ) async throws -> ResourceStream {
        let request = prepared.request
        // Memory decided it, or the disk is read where waiting is allowed.
        var step: LoadPlan.Step
        if let decided = prepared.step {
            step = decided
        } else {
            step = await withBlockingAllowed { self.resume(prepared) }
        }
        if step.answer == nil { step = await self.consultingSharedTiers(step, for: request, policy: prepared.policy) }
        var answer: ResourceStream
        switch step {
        case .answer(let resource), .answerAndRevalidate(let resource, _, _):
            return ResourceStream(resource)
        case .storedOnly:
            answer = ResourceStream(LoadPlan.unavailable)
        case .uncached:
            answer = try await self.withHostSlot(of: request, priority: priority.rawValue) {
                let reply = try await self.sendUncached(request, body: body, interim: delivery.interim)
                let body = ResponseBody(reply, to: request, loader: self)
                guard case .whole(let progress, _) = delivery else { return self.stream(of: body) }
                let received = try await body.collect(progress: progress)
                return ResourceStream(Resource(body: received, response: reply.response, source: .network))
            }
            answer.forwardReason = .method
        case .exchange(let key, let validating, let reason):
            answer = try await self.fly(prepared, key: key, validating: validating, priority: priority, delivery)
            // A flight that found its answer stored since the step was decided went nowhere.
            if answer.source != .memory { answer.forwardReason = reason }
        }
        self.counters.answer(answer.source, bytes: answer.answeredBytes)
        return answer
    }

    // MARK: - Steps

    /// The step for `request` under `key`, with its background revalidation started if it asks
    /// for one; `nil` if, without `readsDisk`, memory held nothing for it and the disk may.
    func step(
        for request: HTTPRequest,
        key: ResponseKey,
        policy: CachePolicy?,
        readsDisk: Bool
    ) -> LoadPlan.Step? {
        guard request.method == .get else { return .uncached }
        let policy = policy ?? self.configuration.policy
        // A reload ignores what is stored: no need to read it (from disk, perhaps).
        guard policy != .reloadIgnoringCacheData else {
            return self.plan(request, key: key, policy: policy, lookup: nil)
        }
        let lookup: TierChain.Lookup?
        if readsDisk {
            lookup = self.lookup(key, for: request, reading: .memoryAndDisk)
        } else {
            guard let found = self.tiers.lookupWithoutWaiting(key, for: request) else { return nil }
            lookup = found
        }
        return self.plan(request, key: key, policy: policy, lookup: lookup)
    }

    /// The step of a `GET` that memory alone could not decide
    /// (``step(for:key:policy:readsDisk:)`` gave none), decided with what the disk holds, its
    /// answer counted.
    private func resume(_ prepared: PreparedLoad) -> LoadPlan.Step {
        let (request, key) = (prepared.request, prepared.key)
        let lookup = self.lookup(key, for: request, reading: .disk)
        let step = self.plan(request, key: key, policy: prepared.policy ?? self.configuration.policy, lookup: lookup)
        if let resource = step.answer { self.counters.answer(resource.source, bytes: resource.body.count) }
        return step
    }

    /// The step for `request` given what is stored for it, uncounted, with its background
    /// revalidation started if it asks for one.
    private func plan(
        _ request: HTTPRequest,
        key: ResponseKey,
        policy: CachePolicy,
        lookup: TierChain.Lookup?
    ) -> LoadPlan.Step {
        let step = LoadPlan.step(
            for: request,
            key: key,
            policy: policy,
            lookup: lookup,
            rules: self.configuration.rules,
            at: self.now(),
            hasSharedTiers: !self.tiers.shared.isEmpty
        )
        guard case .answerAndRevalidate(let resource, let key, let cached) = step else { return step }
        self.revalidateInBackground(request, key: key, cached: cached)
        return .answer(resource)
    }

    /// What is stored for `request`; `nil` if reading the cache failed.
    private func lookup(
        _ key: ResponseKey,
        for request: HTTPRequest,
        reading tiers: TierChain.LocalTiers
    ) -> TierChain.Lookup? {
        do {
            return try self.tiers.lookup(key, for: request, reading: tiers)
        } catch {
            self.logger.debug(
                "Reading the cache failed; loading instead",
                metadata: ["key": "\(key.string)", "error": "\(error)"]
            )
            return nil
        }
    }

    /// `step` taken again with what the shared tiers hold, when it needs the network only
    /// because memory and disk had nothing to use: a response found there is promoted to the
    /// tiers above it and decided on as if it had been found in memory. The step is left as it
    /// is when the request or the policy would not use what a tier holds, or no shared tier has
    /// a response newer than the one the step validates.
    func consultingSharedTiers(
        _ step: LoadPlan.Step,
        for request: HTTPRequest,
        policy: CachePolicy?
    ) async -> LoadPlan.Step {
        guard !self.tiers.shared.isEmpty else { return step }
        let (key, validating): (ResponseKey, CachedResponse?)
        switch step {
        case .exchange(let exchangeKey, let validated, let reason) where reason != .request && reason != .bypass:
            (key, validating) = (exchangeKey, validated)
        case .storedOnly(let storedKey):
            (key, validating) = (storedKey, nil)
        default:
            return step
        }
        self.counters.sharedLookup()
        let epoch = self.tiers.removals.epoch
        let found = await self.tiers.lookupShared(key, for: request) { error in
            self.logger.debug(
                "Reading a shared tier failed; going on without it",
                metadata: ["key": "\(key.string)", "error": "\(error)"]
            )
        }
        // A response found while an invalidation or a purge ran may be what it removed.
        guard let found, self.tiers.removals.isUnchanged(since: epoch),
            validating.map({ found.response.stored.responseTime > $0.stored.responseTime }) ?? true
        else { return step }
        await self.tiers.save(found.response, url: key, request: request, sharedTiers: 0..<found.tier, after: nil)
        let policy = policy ?? self.configuration.policy
        let step = self.plan(request, key: key, policy: policy, lookup: .found(found.response, .shared(found.tier)))
        if let resource = step.answer { self.counters.answer(resource.source, bytes: resource.body.count) }
        return step
    }

    // MARK: - Flights

    /// Joins the flight of identical requests for `key`, or starts it, and takes its answer:
    /// for a whole delivery, the answer read whole; for a streamed one, the head and a body to
    /// read as it arrives, shared where it can be. A caller whose request the shared answer
    /// does not match, or that gets no share of an answer that cannot be shared, sends its own
    /// request.
    ///
    /// A flight that starts, not one joined, looks in memory first: the step was decided when
    /// the load was prepared, and a flight for the key that ended since then stored its answer
    /// there before it ended. Without that look, a request prepared while a flight ran and
    /// resumed after it ended would ask the origin again.
    private func fly(
        _ prepared: PreparedLoad,
        key: ResponseKey,
        validating: CachedResponse?,
        priority: Priority,
        _ delivery: Delivery
    ) async throws -> ResourceStream {
        let request = prepared.request
        let answer: Flights<FlightKey, FlightAnswer>.Boarding
        switch delivery {
        case .whole(let progress, let onWaiting):
            let flight = FlightKey.whole(key, request, validating: validating != nil)
            var reportWaiting: (@Sendable (Int) -> Void)?
            if let onWaiting { reportWaiting = { caller in onWaiting(flight, caller) } }
            answer = try await self.flights.run(
                flight,
                priority: priority.rawValue,
                progress: progress,
                onWaiting: reportWaiting
            ) { run in
                if let stored = self.storedMeanwhile(prepared, key: key, validating: validating) {
                    return .whole(stored)
                }
                return .whole(try await self.exchangeWhole(request, key: key, validating: validating, run: run))
            }
        case .streamed(let interim):
            let flight = FlightKey(key, validating: validating != nil, kind: .streamed)
            answer = try await self.flights.run(flight, priority: priority.rawValue, progress: nil) { run in
                if let stored = self.storedMeanwhile(prepared, key: key, validating: validating) {
                    return .whole(stored)
                }
                return try await self.exchangeShared(
                    request,
                    key: key,
                    validating: validating,
                    run: run,
                    interim: interim
                )
            }
        }
        switch answer.value {
        case .whole(let resource):
            var stream = ResourceStream(resource)
            stream.isCollapsed = answer.joined
            return stream
        case .shared(let shared) where shared.stored.matches(request):
            var stream = ResourceStream(
                response: shared.response,
                source: .network,
                body: shared.body,
                length: shared.length
            )
            stream.isStoring = true
            stream.isCollapsed = answer.joined
            return stream
        case .own(let claim):
            if let stream = claim.take() { return stream }
        case .shared:
            break
        }
        return try await self.withHostSlot(of: request, priority: priority.rawValue) {
            switch try await self.exchange(
                request,
                key: key,
                validating: validating,
                run: nil,
                interim: delivery.interim
            )
            {
            case .answered(let resource): ResourceStream(resource)
            case .response(let incoming): self.stream(of: ResponseBody(incoming, loader: self))
            }
        }
    }

    /// The fresh response that memory holds for `prepared` under `key` now, stored since its
    /// step was decided, as the answer the step would be made of it (see
    /// ``fly(_:key:validating:priority:_:)``); `nil` if there is none, or the step validates
    /// `validating`, which was there when it was decided.
    private func storedMeanwhile(_ prepared: PreparedLoad, key: ResponseKey, validating: CachedResponse?) -> Resource? {
        guard validating == nil, let stored = self.tiers.storedInMemory(key, for: prepared.request) else { return nil }
        let step = LoadPlan.step(
            for: prepared.request,
            key: key,
            policy: prepared.policy ?? self.configuration.policy,
            lookup: .found(stored, .memory),
            rules: self.configuration.rules,
            at: self.now(),
            hasSharedTiers: !self.tiers.shared.isEmpty
        )
        guard case .answer(let resource) = step, resource.source == .memory else { return nil }
        return resource
    }

    /// The operation of a flight whose callers want the answer whole: the request sent when its
    /// host has a free slot, and the answer read and stored if the rules allow.
    private func exchangeWhole(
        _ request: HTTPRequest,
        key: ResponseKey,
        validating: CachedResponse?,
        run: Run
    ) async throws -> Resource {
        try await self.withHostSlot(of: request, ticket: run.id, priority: run.priority) {
            switch try await self.exchange(request, key: key, validating: validating, run: run, interim: nil) {
            case .answered(let resource):
                return resource
            case .response(let incoming):
                let body = try await ResponseBody(incoming, loader: self).collect(progress: run.report, run: run)
                return Resource(body: body, response: incoming.reply.response, source: .network)
            }
        }
    }

    /// The operation of a flight whose callers stream the answer: the request sent, holding a
    /// slot of its host until the head arrives. A response that can be shared answers the
    /// flight's callers as soon as its head is here, and its body is then read from the origin
    /// into the shared response (and stored on the way) at the origin's pace, as the flight's
    /// background work; the flight ends when it is whole.
    ///
    /// Only a response that is stored, bounded (its body is held for the readers) and fresh is
    /// shared: the loads that join could use it stored without validating it.
    private func exchangeShared(
        _ request: HTTPRequest,
        key: ResponseKey,
        validating: CachedResponse?,
        run: Run,
        interim: Interim?
    ) async throws -> FlightAnswer {
        let exchanged = try await self.withHostSlot(of: request, ticket: run.id, priority: run.priority) {
            try await self.exchange(request, key: key, validating: validating, run: nil, interim: interim)
        }
        let incoming: Incoming
        switch exchanged {
        case .answered(let resource): return .whole(resource)
        case .response(let response): incoming = response
        }
        var body = ResponseBody(incoming, loader: self)
        let stored = incoming.stored
        let isFresh =
            stored.freshnessLifetime(isShared: self.configuration.rules.isShared) > stored.age(at: self.now())
            && !stored.cacheControl.isNoCache
        guard body.isStoring, isFresh, let length = incoming.expectedLength else {
            return .own(Claim(self.stream(of: body)))
        }
        let shared = SharedResponse(
            response: incoming.reply.response,
            stored: stored,
            length: length,
            budget: self.bodies
        )
        body.shared = shared
        run.answer(.shared(shared))
        do {
            for try await piece in body { shared.append(piece) }
            shared.finish(.success(()))
        } catch {
            shared.finish(.failure(error))
        }
        return .shared(shared)
    }

    /// A response from the network as a stream whose body is stored as it is read.
    private func stream(of body: ResponseBody) -> ResourceStream {
        var stream = ResourceStream(
            response: body.reply.response,
            source: .network,
            body: HTTPBody(body) { $0 },
            length: body.expectedLength
        )
        stream.isStoring = body.isStoring
        return stream
    }

    /// Starts revalidating `cached` in the background, unless a revalidation of `key` is in
    /// flight.
    private func revalidateInBackground(_ request: HTTPRequest, key: ResponseKey, cached: CachedResponse) {
        let flight = FlightKey(key, validating: true, kind: .revalidation)
        self.flights.start(flight, priority: Priority.low.rawValue) { run in
            FlightAnswer.whole(try await self.exchangeWhole(request, key: key, validating: cached, run: run))
        }
    }

    /// Runs `body` holding one of the request's host's slots (see
    /// ``Configuration/maximumConnectionsPerHost``), waiting for it by `priority` under
    /// `ticket`, by which its priority can be changed.
    private func withHostSlot<Result>(
        of request: HTTPRequest,
        ticket: Int = -1 - Int.random(in: 0..<Int.max),
        priority: Int,
        _ body: () async throws -> Result
    ) async throws -> Result {
        let host = request.authority ?? ""
        try await self.hosts.acquire(host, ticket: ticket, priority: priority)
        defer { self.hosts.release(host) }
        return try await body()
    }
}
