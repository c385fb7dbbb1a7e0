import Glibc

/// A file's bytes said as a delta against another file's (its previous release's version):
/// what a publisher writes for a changed file (`DeltaEncoder`), raw-deflated, and what a client
/// that has the old file applies (`DeltaApplier`). A few lines changed in a 300 KB document
/// cost a few hundred bytes this way, where its changed chunks cost kilobytes each.
///
/// The instructions, one after another until the target is complete: a LEB128 number `v`;
/// `v & 1 == 0` adds the `v >> 1` bytes that follow; `v & 1 == 1` copies `v >> 1` bytes of the
/// base, from the previous copy's end (0 at first) moved by a zigzag LEB128 number that
/// follows. Every length is at least 1, and a target of N bytes takes at most N / 12 + 2
/// instructions (copies of 24 bytes or more, one add between two copies).
enum DeltaCode {
    static func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }
    static func unzigzag(_ v: UInt64) -> Int64 { Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1) }
}

/// Finds what a target shares with a base, LZ77-style with an unbounded window: the base's
/// 16-byte blocks at every `stride` bytes (16, or more so the table stays at 4M blocks) are
/// hashed into a table; the target is scanned byte by byte, first where the last copy would
/// continue (an edit in place), then in the table; a hit is checked and extended both ways.
/// A copy shorter than 24 bytes is not worth its instruction.
package enum DeltaEncoder {
    static let block = 16
    static let minimumCopy = 24

    /// The instructions that turn `base` into `target`.
    package static func encode(base: UnsafeRawBufferPointer, target: UnsafeRawBufferPointer) -> [UInt8] {
        var out: [UInt8] = []
        let n = target.count, m = base.count
        var stride = block
        while m / stride > 1 << 22 { stride *= 2 }
        let blocks = m >= block ? (m - block) / stride + 1 : 0
        var bits = 4
        while 1 << bits < blocks * 2 { bits += 1 }
        var table = [UInt32](repeating: 0, count: blocks > 0 ? 1 << bits : 0)
        @inline(__always) func hash(_ p: UnsafeRawBufferPointer, _ at: Int) -> Int {
            let a = p.loadUnaligned(fromByteOffset: at, as: UInt64.self)
            let b = p.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self)
            return Int(truncatingIfNeeded: (((a &* 0x9E37_79B9_7F4A_7C15) ^ b) &* 0xC2B2_AE3D_27D4_EB4F) >> UInt64(64 - bits))
        }
        if blocks > 0 && m < Int(UInt32.max) {
            var p = (blocks - 1) * stride
            while p >= 0 {  // the first block of equal ones wins
                table[hash(base, p)] = UInt32(p + 1)
                p -= stride
            }
        }
        /// Bytes equal from `t` in the target and `b` in the base.
        func forward(_ t: Int, _ b: Int) -> Int {
            var k = 0
            let most = min(n - t, m - b)
            while k + 8 <= most && target.loadUnaligned(fromByteOffset: t + k, as: UInt64.self) == base.loadUnaligned(fromByteOffset: b + k, as: UInt64.self) {
                k += 8
            }
            while k < most && target[t + k] == base[b + k] { k += 1 }
            return k
        }
        func add(_ from: Int, _ to: Int) {
            guard to > from else { return }
            out.putVarint(UInt64(to - from) << 1)
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: target[from..<to]))
        }
        var i = 0, pending = 0  // pending: the first target byte no instruction covers yet
        var lastEnd = 0, lastTarget = 0  // where the last copy ended, in the base and the target
        while i < n {
            var found = -1
            let aligned = lastEnd + (i - lastTarget)
            if aligned < m && forward(i, aligned) >= minimumCopy {
                found = aligned
            } else if !table.isEmpty && i + block <= n {
                let c = Int(table[hash(target, i)]) - 1
                if c >= 0 && forward(i, c) >= block { found = c }
            }
            guard found >= 0 else { i += 1; continue }
            var t = i, b = found, length = forward(i, found)
            while t > pending && b > 0 && target[t - 1] == base[b - 1] { t -= 1; b -= 1; length += 1 }
            guard length >= minimumCopy else { i += 1; continue }
            add(pending, t)
            out.putVarint(UInt64(length) << 1 | 1)
            out.putVarint(DeltaCode.zigzag(Int64(b) - Int64(lastEnd)))
            lastEnd = b + length
            i = t + length
            lastTarget = i
            pending = i
        }
        add(pending, n)
        return out
    }
}

/// Applies a delta's instructions as they are decoded, in pieces of any size: copies are read
/// from the base (`readBase`), every byte goes to `write` in order. Never more than
/// `targetSize` bytes, never a copy outside the base; `finish` checks the target is complete.
/// Failures are `ERR_INTEGRITY`: the bytes are not the delta the signed index describes.
final class DeltaApplier {
    let targetSize: UInt64
    let baseSize: UInt64
    private let readBase: (UInt64, UnsafeMutableRawBufferPointer) throws -> Void
    private let write: (UnsafeRawBufferPointer) throws -> Void
    private(set) var produced: UInt64 = 0

    private enum State {
        case op(UInt64, UInt64)  // the instruction's number as read so far, its shift
        case adding(UInt64)  // literal bytes left
        case displacement(UInt64, UInt64, UInt64)  // copy length; displacement so far, shift
    }

    private var state = State.op(0, 0)
    /// Instructions read; at most `targetSize / 12 + 2` (the encoder's copies are 24 bytes or
    /// more, each add lies between two copies): a delta can't cost a system call a byte.
    private var instructions: UInt64 = 0
    private var lastEnd: UInt64 = 0
    private var buffer: UnsafeMutableRawBufferPointer?

    init(targetSize: UInt64, baseSize: UInt64, readBase: @escaping (UInt64, UnsafeMutableRawBufferPointer) throws -> Void,
         write: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.targetSize = targetSize
        self.baseSize = baseSize
        self.readBase = readBase
        self.write = write
    }

    deinit { buffer?.deallocate() }

    private func fail(_ what: String) -> AssetPatchError { AssetPatchError(.integrity, "delta: \(what)") }

    func push(_ bytes: UnsafeRawBufferPointer) throws {
        var at = 0
        while at < bytes.count {
            switch state {
            case let .op(value, shift):
                let b = bytes[at]
                at += 1
                guard shift < 63 else { throw fail("an instruction past 64 bits") }
                let v = value | UInt64(b & 0x7F) << shift
                if b & 0x80 != 0 {
                    state = .op(v, shift + 7)
                    continue
                }
                let length = v >> 1
                instructions += 1
                guard instructions <= targetSize / 12 + 2 else { throw fail("more than \(targetSize / 12 + 2) instructions for \(targetSize) bytes") }
                guard length > 0, length <= targetSize - produced else {
                    throw fail("an instruction of \(length) bytes at \(produced) of \(targetSize)")
                }
                state = v & 1 == 0 ? .adding(length) : .displacement(length, 0, 0)
            case let .adding(left):
                let take = Int(min(left, UInt64(bytes.count - at)))
                try emit(UnsafeRawBufferPointer(rebasing: bytes[at..<(at + take)]))
                at += take
                state = left == UInt64(take) ? .op(0, 0) : .adding(left - UInt64(take))
            case let .displacement(length, value, shift):
                let b = bytes[at]
                at += 1
                guard shift < 63 else { throw fail("a displacement past 64 bits") }
                let v = value | UInt64(b & 0x7F) << shift
                if b & 0x80 != 0 {
                    state = .displacement(length, v, shift + 7)
                    continue
                }
                let (from, overflow) = Int64(bitPattern: lastEnd).addingReportingOverflow(DeltaCode.unzigzag(v))
                guard !overflow, from >= 0, UInt64(from) <= baseSize, length <= baseSize - UInt64(from) else {
                    throw fail("a copy of \(length) bytes outside the base's \(baseSize)")
                }
                try copy(UInt64(from), length)
                lastEnd = UInt64(from) + length
                state = .op(0, 0)
            }
        }
    }

    /// The delta ended: it must have made the whole target, and ended between instructions.
    func finish() throws {
        guard case .op(0, 0) = state, produced == targetSize else {
            throw fail("ended at \(produced) of \(targetSize) bytes")
        }
    }

    private func emit(_ bytes: UnsafeRawBufferPointer) throws {
        try write(bytes)
        produced += UInt64(bytes.count)
    }

    private func copy(_ from: UInt64, _ length: UInt64) throws {
        let buffer = self.buffer ?? UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        self.buffer = buffer
        var done: UInt64 = 0
        while done < length {
            let n = Int(min(UInt64(buffer.count), length - done))
            let piece = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
            try readBase(from + done, piece)
            try emit(UnsafeRawBufferPointer(piece))
            done += UInt64(n)
        }
    }
}
