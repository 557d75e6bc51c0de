import Foundation
import Testing

@testable import CachalotImages

/// A variant's life as kept in its metadata, which anyone who can write the disk may have
/// written.
@Suite("Variant life")
struct VariantLifeTests {
    static let digest = VariantLife.digest(of: Data("original".utf8))

    @Test("the expiry and the original's digest read back as written; older metadata has the expiry alone")
    func roundTrip() throws {
        let life = VariantLife(expiry: Date(timeIntervalSince1970: 1_795_000_000), original: Self.digest)
        #expect(VariantLife(metadata: life.metadata) == life)
        #expect(String(decoding: life.metadata, as: UTF8.self) == "CIV2 1795000000 " + Self.digest)
        let old = try #require(VariantLife(metadata: Data("CIV1 1795000000".utf8)))
        #expect(old == VariantLife(expiry: Date(timeIntervalSince1970: 1_795_000_000), original: nil))
        #expect(Self.digest.count == 64 && Self.digest == VariantLife.digest(of: Data("original".utf8)))
        // Lowercase hexadecimal, as metadata written by earlier versions has it (sha256sum's).
        #expect(Self.digest == "0682c5f2076f099c34cfdd15a9e063849ed437a49677e6fcc5b4198c76575be5")
        #expect(Self.digest != VariantLife.digest(of: Data("Original".utf8)))
    }

    @Test(
        "metadata that is not a life is none",
        arguments: [
            "", "CIV2", "CIV2 ", "CIV3 1795000000", "CIV2 -1", "CIV2 99999999999999", "CIV2 9223372036854775807",
            "CIV2 1795000000 abc", "CIV2 1795000000 " + String(repeating: "G", count: 64),
            "CIV2 1795000000 " + String(repeating: "a", count: 63), "CIV1 1795000000 Fri, 27 Nov 2026",
            "CIV2 1795000000 " + String(repeating: "a", count: 64) + " more", "CIV2 1795000000  ",
            "CIV2 1795000000 " + String(repeating: "a", count: 200),
        ]
    )
    func hostile(_ text: String) {
        #expect(VariantLife(metadata: Data(text.utf8)) == nil)
    }

    @Test("an expiry past the year 9999 is kept as its end; a variant stands only for the same bytes")
    func boundsAndStanding() {
        let far = VariantLife(expiry: Date(timeIntervalSince1970: 1e12), original: Self.digest)
        #expect(far.expiry == VariantLife.latestExpiry)
        #expect(VariantLife(metadata: far.metadata) == far)
        let now = Date(timeIntervalSince1970: 1_795_000_000)
        let expired = VariantLife(expiry: now, original: Self.digest)
        #expect(expired.isKept(at: now) && !VariantLife(expiry: now, original: nil).isKept(at: now))
        #expect(expired.stands(for: VariantLife(expiry: now, original: Self.digest)))
        #expect(!expired.stands(for: VariantLife(expiry: now, original: VariantLife.digest(of: Data()))))
        #expect(!VariantLife(expiry: now, original: nil).stands(for: VariantLife(expiry: now, original: nil)))
    }
}
