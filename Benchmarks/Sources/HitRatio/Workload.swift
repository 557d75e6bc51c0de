import CachalotTesting
import Foundation

/// A stream of keys to request, made from a fixed seed.
struct Workload {
    let name: String
    let capacity: Int
    let requests: [Int]

    static let keyCount = 100_000
    static let requestCount = 2_000_000

    /// Ranks drawn from a Zipf distribution over `keyCount` keys with exponent `alpha`.
    struct Zipf {
        private let cumulative: [Double]

        init(alpha: Double, count: Int = Workload.keyCount) {
            var sum = 0.0
            var cumulative = [Double](repeating: 0, count: count)
            for rank in 0..<count {
                sum += 1 / pow(Double(rank + 1), alpha)
                cumulative[rank] = sum
            }
            self.cumulative = cumulative.map { $0 / sum }
        }

        func rank(using random: inout SeededGenerator) -> Int {
            let target = Double.random(in: 0..<1, using: &random)
            var (low, high) = (0, self.cumulative.count - 1)
            while low < high {
                let middle = (low + high) / 2
                if self.cumulative[middle] < target { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }

    /// Zipf requests; popular keys are spread over the key space by a random permutation.
    static func zipf(alpha: Double, cacheShare: Double, seed: UInt64) -> Workload {
        var random = SeededGenerator(seed: seed)
        let zipf = Zipf(alpha: alpha)
        let keys = Array(0..<keyCount).shuffled(using: &random)
        let requests = (0..<requestCount).map { _ in keys[zipf.rank(using: &random)] }
        return Workload(
            name: "Zipf α = \(alpha), cache \(Int(cacheShare * 100)) %",
            capacity: Int(Double(keyCount) * cacheShare),
            requests: requests
        )
    }

    /// Zipf α = 1.0 whose popular keys move to other keys halfway through.
    static func shift(cacheShare: Double, seed: UInt64) -> Workload {
        var random = SeededGenerator(seed: seed)
        let zipf = Zipf(alpha: 1.0)
        let before = Array(0..<keyCount).shuffled(using: &random)
        let after = Array(0..<keyCount).shuffled(using: &random)
        let requests = (0..<requestCount).map { request in
            (request < requestCount / 2 ? before : after)[zipf.rank(using: &random)]
        }
        return Workload(
            name: "popularity moves halfway, α = 1.0, cache \(Int(cacheShare * 100)) %",
            capacity: Int(Double(keyCount) * cacheShare),
            requests: requests
        )
    }

    /// Zipf requests with a scan of 2,000 never-seen keys after every 10,000 requests.
    static func scans(alpha: Double, cacheShare: Double, seed: UInt64) -> Workload {
        var random = SeededGenerator(seed: seed)
        let zipf = Zipf(alpha: alpha)
        let keys = Array(0..<keyCount).shuffled(using: &random)
        var requests: [Int] = []
        requests.reserveCapacity(requestCount)
        var nextScanKey = keyCount
        while requests.count < requestCount {
            for _ in 0..<10_000 { requests.append(keys[zipf.rank(using: &random)]) }
            for _ in 0..<2_000 {
                requests.append(nextScanKey)
                nextScanKey += 1
            }
        }
        return Workload(
            name: "Zipf α = \(alpha) with scans, cache \(Int(cacheShare * 100)) %",
            capacity: Int(Double(keyCount) * cacheShare),
            requests: Array(requests.prefix(requestCount))
        )
    }
}
