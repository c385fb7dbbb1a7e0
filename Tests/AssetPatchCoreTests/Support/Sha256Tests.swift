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
        // Every byte in every word: refused unless a hex digit, read as its value when one.
        for b in 0...255 {
            let digit = Array("0123456789abcdef".utf8).firstIndex(of: UInt8(b)) ?? Array("0123456789ABCDEF".utf8).firstIndex(of: UInt8(b))
            for at in [0, 17, 34, 63] {
                var text = Array(good.utf8)
                text[at] = UInt8(b)
                let read = text.withUnsafeBytes { Sha256(hexDigits: $0) }
                #expect((read == nil) == (digit == nil), "\(b) at \(at)")
                if let read, let digit { #expect(Array(read.hex.utf8)[at] == Array("0123456789abcdef".utf8)[digit]) }
            }
        }
        #expect(Sha256(bytes: [UInt8](repeating: 0, count: 31)) == nil && Sha256(bytes: [UInt8](repeating: 0, count: 33)) == nil)
    }
}
