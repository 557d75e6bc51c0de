import Testing

@testable import CachalotPostgres

/// When a process trims a database, knowing its size only from what its trims read and what it
/// wrote since.
struct SizeEstimateTests {
    /// A 64th of it is 1,000 bytes.
    static let limit: Int64 = 64_000

    /// Counts writes of `sizes` bytes; answers whether a trim was due after each.
    static func due(_ estimate: inout SizeEstimate, _ sizes: [Int64]) -> [Bool] {
        sizes.map { estimate.count($0, maximumSize: Self.limit) }
    }

    @Test func aTrimIsDueOnceThisProcessHasWrittenASixtyFourthOfTheLimit() {
        var estimate = SizeEstimate()
        #expect(Self.due(&estimate, Array(repeating: 100, count: 11)) == Array(repeating: false, count: 10) + [true])
        // While it runs, writes start no other trim.
        #expect(Self.due(&estimate, [5_000]) == [false])
        // It read the size when 1,100 bytes were unseen; the 5,000 written since still are.
        estimate.trimmed(toSize: 30_000, seen: 1_100)
        #expect(estimate.unseen == 5_000)
        #expect(Self.due(&estimate, [1]) == [true])
    }

    @Test func aTrimIsDueOnceTheSizeTheLastTrimLeftAndWhatWasWrittenSinceGoOverTheLimit() {
        var estimate = SizeEstimate()
        #expect(Self.due(&estimate, [1_001]) == [true])
        estimate.trimmed(toSize: 63_500, seen: 1_001)
        #expect(Self.due(&estimate, [400, 200]) == [false, true])
    }

    @Test func aTrimIsDueEverySixtyFourthWriteForTheAgeLimit() {
        var estimate = SizeEstimate()
        let everySixtyFourth = Array(repeating: false, count: 63) + [true]
        #expect(Self.due(&estimate, Array(repeating: 0, count: 64)) == everySixtyFourth)
        estimate.trimmed(toSize: 0, seen: 0)
        #expect(Self.due(&estimate, Array(repeating: 0, count: 64)) == everySixtyFourth)
    }

    @Test func aTrimThatReadNothingLeavesWhatWasWrittenUnseenAndTheNextWriteTriesAgain() {
        var estimate = SizeEstimate()
        #expect(Self.due(&estimate, [2_000]) == [true])
        estimate.trimmed(toSize: nil, seen: 0)
        #expect(estimate.unseen == 2_000)
        #expect(estimate.trimmedSize == 0)
        #expect(Self.due(&estimate, [1]) == [true])
    }
}
