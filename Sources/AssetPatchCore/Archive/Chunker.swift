import Glibc

/// Content-defined chunking (FastCDC's gear hash with normalised chunking): boundaries follow the
/// bytes, not their offsets, so an insertion or a deletion inside a large file moves only the
/// boundaries next to it and every chunk after it keeps its bytes and its hash.
///
/// A rolling 64-bit gear hash (`h = h << 1 + gear[byte]`) looks at the last 64 bytes. A boundary
/// falls where the hash's top bits are zero: more bits are asked for before the average size
/// (`maskSmall`), fewer after it (`maskLarge`), which draws chunk sizes close to the average; no
/// chunk is shorter than `minSize` (except a file's last) or longer than `maxSize`. The gear table
/// comes from a fixed seed, so publisher and clients cut the same bytes the same way.
package struct Chunker: Sendable, Equatable {
    package let averageSize: Int
    package let minSize: Int
    package let maxSize: Int
    private let maskSmall: UInt64
    private let maskLarge: UInt64

    /// The chunk sizes allowed: powers of two from 4 KiB to 1 MiB.
    package static let averageSizes = (12...20).map { 1 << $0 }

    /// A chunker for `averageSize` (a power of two, 4 KiB to 1 MiB): chunks of a quarter to four
    /// times that. nil for another size.
    package init?(averageSize: Int) {
        guard Chunker.averageSizes.contains(averageSize) else { return nil }
        self.averageSize = averageSize
        minSize = averageSize / 4
        maxSize = averageSize * 4
        let bits = averageSize.trailingZeroBitCount
        maskSmall = Chunker.topMask(bits + 2)
        maskLarge = Chunker.topMask(bits - 2)
    }

    private static func topMask(_ bits: Int) -> UInt64 { bits <= 0 ? 0 : ~UInt64(0) << UInt64(64 - bits) }

    /// 256 pseudo-random 64-bit values (splitmix64 from a fixed seed): part of the format.
    static let gear: [UInt64] = {
        var x: UInt64 = 0x6173_7365_7470_6174  // "assetpat"
        return (0..<256).map { _ in
            x &+= 0x9E37_79B9_7F4A_7C15
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }()

    /// The length of the chunk that starts at `bytes`' first byte: a boundary found by the
    /// rules above, or the end of `bytes` when it holds no boundary and `atEnd` says nothing
    /// follows. nil when more bytes are needed to decide (no boundary within `bytes`, not at the
    /// end, and `bytes` is shorter than `maxSize`).
    package func cut(_ bytes: UnsafeRawBufferPointer, atEnd: Bool) -> Int? {
        let n = bytes.count
        if n <= minSize { return atEnd ? n : nil }
        let p = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let normal = min(n, averageSize), limit = min(n, maxSize)
        var h: UInt64 = 0
        var i = minSize
        // The hash needs its window filled: start 64 bytes before the first possible cut.
        var j = max(0, minSize - 64)
        while j < minSize { h = (h << 1) &+ Chunker.gear[Int(p[j])]; j += 1 }
        while i < normal {
            h = (h << 1) &+ Chunker.gear[Int(p[i])]
            i += 1
            if h & maskSmall == 0 { return i }
        }
        while i < limit {
            h = (h << 1) &+ Chunker.gear[Int(p[i])]
            i += 1
            if h & maskLarge == 0 { return i }
        }
        if limit == maxSize { return maxSize }
        return atEnd ? n : nil
    }

    /// Cuts a file into chunks, reading it in pieces (memory bounded by `maxSize` plus a read
    /// buffer); `body` gets each chunk's bytes in order.
    package func chunks(of file: File, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        let capacity = max(maxSize * 2, 1 << 20)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
        defer { buffer.deallocate() }
        var have = 0, offset: UInt64 = 0, eof = false
        while true {
            while !eof && have < capacity {
                let n = try file.pread(into: UnsafeMutableRawBufferPointer(rebasing: buffer[have...]), at: offset)
                if n == 0 { eof = true; break }
                have += n
                offset += UInt64(n)
            }
            if have == 0 { return }
            var start = 0
            while start < have {
                let window = UnsafeRawBufferPointer(rebasing: buffer[start..<have])
                guard let len = cut(window, atEnd: eof) else { break }
                try body(UnsafeRawBufferPointer(rebasing: buffer[start..<(start + len)]))
                start += len
            }
            // What is left is shorter than a decision needs: move it to the front, read more.
            if start > 0 {
                (buffer.baseAddress! + 0).copyMemory(from: buffer.baseAddress! + start, byteCount: have - start)
                have -= start
            }
            if eof && have == 0 { return }
        }
    }
}
