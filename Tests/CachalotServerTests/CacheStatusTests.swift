import Testing

@testable import CachalotServer

@Suite("CacheStatus: the proxy's member of Cache-Status")
struct CacheStatusTests {
    @Test("A hit: the name, hit, and the seconds it stays fresh")
    func hit() {
        var status = CacheStatus(name: "cachalot")
        status.hit = true
        status.timeToLive = 3599
        #expect(status.description == "cachalot; hit; ttl=3599")
        status.timeToLive = 0
        #expect(status.description == "cachalot; hit; ttl=0")
    }

    @Test("Every parameter in its order; a stale answer's time to live below zero, with its sign")
    func everyParameter() {
        var status = CacheStatus(name: "edge-1")
        status.forward = "stale"
        status.forwardStatus = 304
        status.timeToLive = -12
        status.stored = true
        status.collapsed = true
        #expect(status.description == "edge-1; fwd=stale; fwd-status=304; ttl=-12; stored; collapsed")
        status.timeToLive = Int.min
        #expect(status.description.contains("; ttl=-9223372036854775808;"))
    }

    @Test("A detail is a token when it can be one, else a quoted string")
    func detail() {
        #expect(
            CacheStatus(name: "c", forward: "miss", detail: "origin-timeout").description
                == "c; fwd=miss; detail=origin-timeout"
        )
        let quoted = CacheStatus(name: "c", forward: nil, detail: "two \"words\"")
        #expect(quoted.description == #"c; detail="two \"words\"""#)
        #expect(CacheStatus(name: "c").description == "c")
    }

    @Test("The length it counts is the length it writes, for every parameter and detail")
    func length() {
        var statuses = [CacheStatus(name: "c"), CacheStatus(name: "c", forward: nil, detail: "two \"words\"")]
        var status = CacheStatus(name: "edge-1", forward: "miss", detail: "origin-timeout")
        statuses.append(status)
        status.hit = true
        for timeToLive in [0, 9, 10, -1, Int.max, Int.min] {
            status.timeToLive = timeToLive
            statuses.append(status)
        }
        status.forwardStatus = 304
        status.stored = true
        status.collapsed = true
        statuses.append(status)
        for status in statuses {
            #expect(status.length == status.description.utf8.count, "\(status.description)")
        }
    }
}
