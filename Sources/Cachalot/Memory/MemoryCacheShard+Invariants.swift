import Synchronization

extension MemoryCacheShard {
    /// Describes every way the shard's structures disagree with each other; empty when sound.
    ///
    /// Checks that each entry is found through the index, that the index holds nothing else,
    /// that the two queues link every entry exactly once with the right counts and costs, and
    /// that the totals and limits hold. Tests call it after every operation.
    func invariantViolations() -> [String] {
        var violations: [String] = []
        let occupied = self.buckets.filter { $0 != Self.none }.count
        if occupied != self.entries.count {
            violations.append("\(occupied) occupied buckets for \(self.entries.count) entries")
        }
        for (position, entry) in self.entries.enumerated()
        where self.find(entry.key, hash: entry.hash) != Int32(position) {
            violations.append("entry \(position) is not found through the index")
        }
        var linked = Set<Int32>()
        for isMain in [false, true] {
            let queue = isMain ? self.main : self.small
            var (count, cost, index, newer) = (0, 0, queue.tail, Self.none)
            while index != Self.none, count <= self.entries.count {
                let entry = self.entries[Int(index)]
                if entry.isInMainQueue != isMain { violations.append("entry \(index) is flagged for the other queue") }
                if entry.older != newer && count > 0 || count == 0 && entry.older != Self.none {
                    violations.append("entry \(index) has a wrong link to its older neighbour")
                }
                linked.insert(index)
                (count, cost, newer, index) = (count + 1, cost + entry.cost, index, entry.newer)
            }
            if newer != queue.head { violations.append("the \(isMain ? "main" : "small") queue's head is wrong") }
            if count != queue.count || cost != queue.cost {
                violations.append(
                    "the \(isMain ? "main" : "small") queue counts \(queue.count)/\(queue.cost), links \(count)/\(cost)"
                )
            }
        }
        if linked.count != self.entries.count {
            violations.append("\(linked.count) linked of \(self.entries.count) entries")
        }
        let cost = self.entries.reduce(0) { $0 + $1.cost }
        if cost != self.totalCost { violations.append("total cost \(self.totalCost), entries add up to \(cost)") }
        let expiring = self.entries.filter { $0.expiry != Self.never }.count
        if expiring != self.expiringCount {
            violations.append("expiring count \(self.expiringCount), actual \(expiring)")
        }
        if self.totalCost > self.costLimit { violations.append("cost \(self.totalCost) above limit \(self.costLimit)") }
        if self.entries.count > self.countLimit {
            violations.append("count \(self.entries.count) above limit \(self.countLimit)")
        }
        return violations
    }
}

extension MemoryCache {
    /// Describes every broken invariant of every shard, and entries held by the wrong shard.
    func invariantViolations() -> [String] {
        (0..<self.shardCount).flatMap { index in
            self.withExclusiveAccess(toShard: index) { state in
                var violations = state.invariantViolations().map { "shard \(index): \($0)" }
                for entry in state.entries where self.shardIndex(for: entry.hash) != index {
                    violations.append("shard \(index) holds an entry of shard \(self.shardIndex(for: entry.hash))")
                }
                return violations
            }
        }
    }
}
