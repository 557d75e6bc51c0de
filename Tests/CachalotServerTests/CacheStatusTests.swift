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
}
