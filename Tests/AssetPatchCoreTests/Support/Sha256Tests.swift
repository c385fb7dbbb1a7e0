import Testing
@testable import AssetPatchCore

@Suite struct Sha256Tests {
    @Test func hexAndBytesRoundTripAndOrderAsTheHexDoes() throws {
        // Every nibble position and value, across the four word boundaries.
        let bytes: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let hex = Hex.encode(bytes)
        let d = try #require(Sha256(hex: hex))
        #expect(d.hex == hex && d.bytes == bytes && Sha256(bytes: bytes) == d)
        #expect(Sha256(hex: hex.uppercased())?.hex == hex)
        let digests = (0..<200).map { i in Sha256(bytes: (0..<32).map { UInt8(truncatingIfNeeded: ($0 * 7 + i * 13) % 251) })! }
        #expect(digests.sorted().map(\.hex) == digests.map(\.hex).sorted())
        #expect(Set(digests).count == Set(digests.map(\.hex)).count)
        // A change in the last byte of each word is another digest.
        for i in [7, 15, 23, 31] {
            var other = bytes
            other[i] ^= 1
            #expect(Sha256(bytes: other) != d)
        }
    }

    @Test func anythingButSixtyFourHexDigitsIsRefused() {
        let good = String(repeating: "ab", count: 32)
        for bad in ["", String(good.dropLast()), good + "0", String(good.dropLast()) + "g", String(good.dropLast()) + " ",
                    "0x" + String(good.dropFirst(2)), String(good.dropLast()) + "\u{e9}"] {
            #expect(Sha256(hex: bad) == nil, "\(bad)")
        }
        #expect(Sha256(bytes: [UInt8](repeating: 0, count: 31)) == nil && Sha256(bytes: [UInt8](repeating: 0, count: 33)) == nil)
    }
}
