import Glibc

/// An immutable name -> absolute path table for resources under one or more root directories
/// (a release, the bundle, or both for the table resolved ahead for variants). Lookups hash raw
/// bytes and compare them in one contiguous arena: no allocation, no system call. Built once,
/// then shared by every resolving thread.
///
/// A path is its root, "/", and the file's name under the root, copied out in two pieces: the
/// arena holds each name once (and the file's name only where a variant makes it differ), not
/// a root per entry, so 100,000 names take about a third of the memory (and cache) they did.
package final class NameTable: @unchecked Sendable {  // immutable after init; the buffers are never written again
    /// 16 bytes, four to a cache line.
    struct Slot {
        var hash: UInt32       // the high half of the name's hash (the low bits pick the slot)
        var name: UInt32       // offset of the name in the arena; `empty`: no entry
        var nameLength: UInt16
        var fileLength: UInt16 // the file's name follows the name in the arena; 0: the file is the name
        var root: UInt8        // index into `roots`
        var tag: UInt8         // what the entry carries besides its path (the variant matched)

        static let empty = UInt32.max
        static let vacant = Slot(hash: 0, name: empty, nameLength: 0, fileLength: 0, root: 0, tag: 0)
    }

    /// A lookup's answer: the path is `root` followed by `file` (root ends in "/").
    struct Hit {
        var root: UnsafeRawBufferPointer
        var file: UnsafeRawBufferPointer
        var tag: Int
        /// Which of the table's roots (a release's on-demand groups have their own).
        var rootIndex: Int
        var count: Int { root.count + file.count }

        /// Writes the path and a NUL at `out` (`count + 1` bytes).
        @inline(__always)
        func copy(to out: UnsafeMutableRawPointer) {
            root.copyTo(out)
            file.copyTo(out + root.count)
            out.storeBytes(of: 0, toByteOffset: count, as: UInt8.self)
        }

        var path: String { String(decoding: root, as: UTF8.self) + String(decoding: file, as: UTF8.self) }
    }

    /// The arena holds at most this many bytes (offsets are 32-bit); names beyond it are left
    /// out. A release's names are bounded far below by `max_manifest_bytes`.
    static let arenaLimit = Int(UInt32.max) - 1

    private let arena: UnsafeMutableRawBufferPointer
    private let slots: UnsafeMutableBufferPointer<Slot>
    private let mask: Int
    /// Each root's bytes with a trailing "/", back to back in `rootBytes`; `rootSpans` holds
    /// each one's offset and length (raw memory: no array to check or retain on a lookup).
    private let rootBytes: UnsafeMutableRawBufferPointer
    private let rootSpans: UnsafeMutableBufferPointer<(offset: UInt32, length: UInt32)>
    package private(set) var count = 0
    package let root: String
    /// Every root, in order (entries name one by index).
    package let roots: [String]

    /// `root` is the directory holding the files; `names` are validated relative names.
    package convenience init(root: String, names: [String]) {
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(names.count)
        for n in names {
            let start = bytes.count
            bytes += n.utf8
            ranges.append(start..<bytes.count)
        }
        self.init(root: root, bytes: bytes, ranges: ranges)
    }

    /// Builds from NUL-separated names (the release's `names` file), straight from the bytes;
    /// nil if any name is invalid.
    package convenience init?(root: String, nulSeparated bytes: [UInt8], roots: [String]? = nil, rootOf: ((Int) -> Int)? = nil) {
        var ranges: [Range<Int>] = []
        let valid = bytes.withUnsafeBytes { all -> Bool in
            var start = 0
            for i in 0..<all.count where all[i] == 0 {
                guard ResourceName.isValid(UnsafeRawBufferPointer(rebasing: all[start..<i])) else { return false }
                ranges.append(start..<i)
                start = i + 1
            }
            return start == all.count
        }
        guard valid else { return nil }
        self.init(root: root, bytes: bytes, ranges: ranges, roots: roots, rootOf: rootOf)
    }

    /// The names are `bytes[range]` for each range, all files of `root`.
    /// `rootOf(i)`: the root of name `i` (default: the first; negative: left out); `roots` at most 255.
    init(root: String, bytes: [UInt8], ranges: [Range<Int>], roots: [String]? = nil, rootOf: ((Int) -> Int)? = nil) {
        self.root = root
        self.roots = roots ?? [root]
        (rootBytes, rootSpans) = NameTable.packRoots(self.roots)
        arena = .allocate(byteCount: max(min(bytes.count, NameTable.arenaLimit), 1), alignment: 8)
        (slots, mask) = NameTable.makeSlots(for: ranges.count)
        var used = 0
        bytes.withUnsafeBytes { all in
            for (i, r) in ranges.enumerated() {
                let root = rootOf?(i) ?? 0
                if root < 0 { continue }  // left out: another table answers for it
                insert(UnsafeRawBufferPointer(rebasing: all[r]), file: nil, root: root, tag: 0, used: &used)
            }
        }
    }

    /// Entries to build a table from, their bytes back to back (no allocation per entry).
    struct Entries {
        var bytes: [UInt8] = []
        var spans: [(name: Range<Int>, file: Range<Int>, root: Int, tag: Int)] = []

        /// `name` resolves to `file` under root number `root`.
        mutating func append(name: UnsafeRawBufferPointer, file: UnsafeRawBufferPointer, root: Int, tag: Int) {
            let n = bytes.count
            bytes.append(contentsOf: name)
            let f = bytes.count
            if !name.elementsEqual(file) { bytes.append(contentsOf: file) }
            spans.append((n..<f, f..<bytes.count, root, tag))
        }
    }

    /// A table of `entries` over `roots` (at most 255, each entry naming one by index); the first
    /// entry of a name wins.
    init(roots: [String], entries: Entries) {
        root = roots.first ?? ""
        self.roots = roots
        (rootBytes, rootSpans) = NameTable.packRoots(roots)
        arena = .allocate(byteCount: max(min(entries.bytes.count, NameTable.arenaLimit), 1), alignment: 8)
        (slots, mask) = NameTable.makeSlots(for: entries.spans.count)
        var used = 0
        entries.bytes.withUnsafeBytes { all in
            for e in entries.spans {
                insert(UnsafeRawBufferPointer(rebasing: all[e.name]), file: e.file.isEmpty ? nil : UnsafeRawBufferPointer(rebasing: all[e.file]),
                       root: e.root, tag: e.tag, used: &used)
            }
        }
    }

    private static func packRoots(_ roots: [String]) -> (UnsafeMutableRawBufferPointer, UnsafeMutableBufferPointer<(offset: UInt32, length: UInt32)>) {
        var bytes: [UInt8] = []
        let spans = UnsafeMutableBufferPointer<(offset: UInt32, length: UInt32)>.allocate(capacity: max(roots.count, 1))
        spans.initialize(repeating: (0, 0))
        for (i, r) in roots.enumerated() {
            let start = bytes.count
            bytes += r.utf8
            bytes.append(UInt8(ascii: "/"))
            spans[i] = (UInt32(start), UInt32(bytes.count - start))
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 8)
        bytes.withUnsafeBytes { $0.copyTo(buffer.baseAddress!) }
        return (buffer, spans)
    }

    /// At least twice as many slots as entries (a power of two): probes stay short.
    private static func makeSlots(for entries: Int) -> (UnsafeMutableBufferPointer<Slot>, Int) {
        var capacity = 16
        while capacity < entries * 2 { capacity <<= 1 }
        let slots = UnsafeMutableBufferPointer<Slot>.allocate(capacity: capacity)
        slots.initialize(repeating: .vacant)
        return (slots, capacity - 1)
    }

    /// Adds `name` (resolving to `file` under root `root`, or to the name itself when `file` is
    /// nil) unless it is already there, its bytes at `used` in the arena.
    private func insert(_ nameBytes: UnsafeRawBufferPointer, file: UnsafeRawBufferPointer?, root: Int, tag: Int, used: inout Int) {
        let size = nameBytes.count + (file?.count ?? 0)
        guard used + size <= arena.count, nameBytes.count <= Int(UInt16.max), (file?.count ?? 0) <= Int(UInt16.max),
              root < 256, tag < 256 else { return }
        let h = NameTable.hash(nameBytes)
        var i = Int(truncatingIfNeeded: h) & mask
        while slots[i].name != Slot.empty {
            if slots[i].hash == UInt32(truncatingIfNeeded: h >> 32) && bytesEqual(Int(slots[i].name), Int(slots[i].nameLength), nameBytes) { return }
            i = (i + 1) & mask
        }
        let nameOffset = used
        nameBytes.copyTo(arena.baseAddress! + used)
        used += nameBytes.count
        if let file {
            file.copyTo(arena.baseAddress! + used)
            used += file.count
        }
        slots[i] = Slot(hash: UInt32(truncatingIfNeeded: h >> 32), name: UInt32(nameOffset), nameLength: UInt16(nameBytes.count),
                        fileLength: UInt16(file?.count ?? 0), root: UInt8(root), tag: UInt8(tag))
        count += 1
    }

    /// Every file an entry resolves to, and the index of its root.
    func forEachFile(_ body: (UnsafeRawBufferPointer, Int) -> Void) {
        for i in 0...mask where slots[i].name != Slot.empty {
            let s = slots[i]
            body(file(of: s, name: UnsafeRawBufferPointer(start: arena.baseAddress! + Int(s.name), count: Int(s.nameLength))), Int(s.root))
        }
    }

    deinit {
        arena.deallocate()
        slots.deallocate()
        rootBytes.deallocate()
        rootSpans.deallocate()
    }

    @inline(__always)
    private func bytesEqual(_ offset: Int, _ length: Int, _ other: UnsafeRawBufferPointer) -> Bool {
        length == other.count && (length == 0 || memcmp(arena.baseAddress! + offset, other.baseAddress!, length) == 0)
    }

    @inline(__always)
    private func file(of s: Slot, name: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        s.fileLength == 0 ? name : UnsafeRawBufferPointer(start: name.baseAddress! + name.count, count: Int(s.fileLength))
    }

    /// A 64-bit hash that reads eight bytes at a time (a byte-at-a-time hash costs a multiply
    /// per byte, as much as the rest of a lookup): each word mixed in with a multiply and a
    /// shift, the last one to seven bytes read as overlapping pieces (as wyhash does), then a
    /// finaliser (splitmix64's) so that the slot (low bits) and the tag (high bits) both depend
    /// on every byte. In memory only: tables are built at each open.
    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let n = bytes.count
        guard let p = bytes.baseAddress else { return 0 }
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(truncatingIfNeeded: n)
        var i = 0
        while i + 8 <= n {
            h = (h ^ p.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0xBF58_476D_1CE4_E5B9
            h ^= h >> 31
            i += 8
        }
        let rest = n - i
        var tail: UInt64 = 0
        if rest >= 4 {
            tail = UInt64(p.loadUnaligned(fromByteOffset: i, as: UInt32.self)) << 32
                | UInt64(p.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self))
        } else if rest > 0 {
            let b = p.assumingMemoryBound(to: UInt8.self)
            tail = UInt64(b[i]) << 16 | UInt64(b[i + rest / 2]) << 8 | UInt64(b[n - 1])
        }
        h = (h ^ tail ^ 0x94D0_49BB_1331_11EB) &* 0xBF58_476D_1CE4_E5B9
        h = (h ^ (h >> 27)) &* 0x94D0_49BB_1331_11EB
        return h ^ (h >> 31)
    }

    /// Where `name` resolves (root, file, tag), or nil.
    @inline(__always)
    func lookup(_ name: UnsafeRawBufferPointer) -> Hit? {
        let h = NameTable.hash(name)
        let tag = UInt32(truncatingIfNeeded: h >> 32)
        let slots = self.slots.baseAddress!
        var i = Int(truncatingIfNeeded: h) & mask
        while true {
            let s = slots[i]
            if s.name == Slot.empty { return nil }
            if s.hash == tag && bytesEqual(Int(s.name), Int(s.nameLength), name) {
                let stored = UnsafeRawBufferPointer(start: arena.baseAddress! + Int(s.name), count: Int(s.nameLength))
                let r = rootSpans.baseAddress![Int(s.root)]
                return Hit(root: UnsafeRawBufferPointer(start: rootBytes.baseAddress! + Int(r.offset), count: Int(r.length)),
                           file: file(of: s, name: stored), tag: Int(s.tag), rootIndex: Int(s.root))
            }
            i = (i + 1) & mask
        }
    }

    /// The absolute path for `name`, or nil.
    package func lookup(_ name: String) -> String? {
        var n = name
        return n.withUTF8 { b in lookup(UnsafeRawBufferPointer(b))?.path }
    }
}

extension UnsafeRawBufferPointer {
    /// Copies the bytes to `destination` (nothing for an empty buffer).
    @inline(__always)
    func copyTo(_ destination: UnsafeMutableRawPointer) {
        if let base = baseAddress, count > 0 { destination.copyMemory(from: base, byteCount: count) }
    }
}
