/// A SHA-256 digest held inline: four words, no allocation. A release of 100,000 files kept
/// its files' digests as 64-character Strings, about 10 MB of heap for each copy of the list;
/// as values they are 3.2 MB and hash and compare as four words.
package struct Sha256: Hashable, Sendable, Comparable {
    private var words: (UInt64, UInt64, UInt64, UInt64)

    /// The digest of 32 bytes.
    package init?<C: Collection>(bytes: C) where C.Element == UInt8 {
        guard bytes.count == 32 else { return nil }
        words = (0, 0, 0, 0)
        var acc: UInt64 = 0
        for (i, b) in bytes.enumerated() {
            acc = acc << 8 | UInt64(b)
            if i & 7 == 7 { set(i >> 3, acc) }
        }
    }

    /// Exactly 64 hex digits, either case; nil for anything else.
    package init?(hex: String) {
        var hex = hex
        guard let digest = hex.withUTF8({ Sha256(hexDigits: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = digest
    }

    /// Exactly 64 hex digits as UTF-8 bytes, either case; nil for anything else. (Read from a
    /// pointer: a release record's 100,000 digests went through `String.utf8` at 5 ns a byte.)
    package init?(hexDigits: UnsafeRawBufferPointer) {
        guard hexDigits.count == 64 else { return nil }
        words = (0, 0, 0, 0)
        var bad = false
        for w in 0..<4 {
            var acc: UInt64 = 0
            for i in (w << 4)..<((w + 1) << 4) {
                // Without a branch per digit: a digit, or a letter a-f either case.
                let c = hexDigits[i]
                let d = c &- 48, l = (c | 0x20) &- 97
                bad = bad || (d >= 10 && l >= 6)
                acc = acc << 4 | UInt64(d < 10 ? d : l &+ 10)
            }
            set(w, acc)
        }
        if bad { return nil }
    }

    private mutating func set(_ i: Int, _ w: UInt64) {
        switch i {
        case 0: words.0 = w
        case 1: words.1 = w
        case 2: words.2 = w
        default: words.3 = w
        }
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: c - 48
        case 97...102: c - 87
        case 65...70: c - 55
        default: nil
        }
    }

    /// The 32 bytes.
    package var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for w in [words.0, words.1, words.2, words.3] {
            for s in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: w >> UInt64(s))) }
        }
        return out
    }

    /// 64 lowercase hex digits.
    package var hex: String {
        String(unsafeUninitializedCapacity: 64) { buffer in
            writeHex(to: buffer)
            return 64
        }
    }

    /// Appends the 64 lowercase hex digits to `out`.
    package func appendHex(to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: 64))
        out.withUnsafeMutableBufferPointer { writeHex(to: UnsafeMutableBufferPointer(rebasing: $0[start...])) }
    }

    /// The 64 lowercase hex digits into the first 64 bytes of `buffer`.
    private func writeHex(to buffer: UnsafeMutableBufferPointer<UInt8>) {
        let digits: StaticString = "0123456789abcdef"
        for i in 0..<64 {
            let w = i < 16 ? words.0 : i < 32 ? words.1 : i < 48 ? words.2 : words.3
            buffer[i] = digits.utf8Start[Int(w >> UInt64(60 - 4 * (i & 15)) & 15)]
        }
    }

    package static func == (a: Sha256, b: Sha256) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    /// The order of the hex strings (big-endian words).
    package static func < (a: Sha256, b: Sha256) -> Bool {
        (a.words.0, a.words.1, a.words.2, a.words.3) < (b.words.0, b.words.1, b.words.2, b.words.3)
    }
}
