/// An immutable name -> absolute path table for one directory of resources (a release or the
/// bundle). Lookups hash raw bytes and compare them in one contiguous arena: no allocation,
/// no system call. Built once, then shared by every resolving thread.
public final class ResolveIndex: @unchecked Sendable {  // immutable after init; the buffers are never written again
    struct Slot {
        var hash: UInt64
        var name: Int      // offset of the name in the arena
        var nameLength: Int
        var path: Int      // offset of the NUL-terminated absolute path
        var pathLength: Int
    }

    private let arena: UnsafeMutableRawBufferPointer
    private let slots: UnsafeMutableBufferPointer<Slot>
    private let mask: Int
    public private(set) var count = 0
    public let root: String

    /// `root` is the directory holding the files; `names` are validated relative names.
    public convenience init(root: String, names: [String]) {
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
    public convenience init?(root: String, nulSeparated bytes: [UInt8]) {
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
        self.init(root: root, bytes: bytes, ranges: ranges)
    }

    /// The names are `bytes[range]` for each range.
    init(root: String, bytes: [UInt8], ranges: [Range<Int>]) {
        self.root = root
        let rootBytes = Array(root.utf8)
        var arenaSize = 0
        for r in ranges { arenaSize += r.count * 2 + rootBytes.count + 2 }
        arena = .allocate(byteCount: max(arenaSize, 1), alignment: 8)
        var capacity = 16
        while capacity < ranges.count * 2 { capacity <<= 1 }
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: Slot(hash: 0, name: -1, nameLength: 0, path: 0, pathLength: 0))
        mask = capacity - 1
        var used = 0
        bytes.withUnsafeBytes { all in
            for r in ranges {
                let nameBytes = UnsafeRawBufferPointer(rebasing: all[r])
                let h = ResolveIndex.hash(nameBytes)
                var i = Int(truncatingIfNeeded: h) & mask
                var duplicate = false
                while slots[i].name >= 0 {
                    if slots[i].hash == h && bytesEqual(slots[i].name, slots[i].nameLength, nameBytes) { duplicate = true; break }
                    i = (i + 1) & mask
                }
                if duplicate { continue }
                let nameOffset = used
                if nameBytes.count > 0 { (arena.baseAddress! + used).copyMemory(from: nameBytes.baseAddress!, byteCount: nameBytes.count) }
                used += nameBytes.count
                let pathOffset = used
                rootBytes.withUnsafeBytes { (arena.baseAddress! + used).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                used += rootBytes.count
                arena[used] = UInt8(ascii: "/")
                used += 1
                if nameBytes.count > 0 { (arena.baseAddress! + used).copyMemory(from: nameBytes.baseAddress!, byteCount: nameBytes.count) }
                used += nameBytes.count
                arena[used] = 0
                used += 1
                slots[i] = Slot(hash: h, name: nameOffset, nameLength: nameBytes.count, path: pathOffset, pathLength: used - 1 - pathOffset)
                count += 1
            }
        }
    }

    deinit {
        arena.deallocate()
        slots.deallocate()
    }

    @inline(__always)
    private func bytesEqual(_ offset: Int, _ length: Int, _ other: UnsafeRawBufferPointer) -> Bool {
        length == other.count && (length == 0 || memcmp(arena.baseAddress! + offset, other.baseAddress!, length) == 0)
    }

    /// FNV-1a, 64-bit.
    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        return h
    }

    /// The NUL-terminated absolute path for `name` (without the NUL in the count), or nil.
    @inline(__always)
    public func lookup(_ name: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        let h = ResolveIndex.hash(name)
        var i = Int(truncatingIfNeeded: h) & mask
        while true {
            let s = slots[i]
            if s.name < 0 { return nil }
            if s.hash == h && bytesEqual(s.name, s.nameLength, name) {
                return UnsafeRawBufferPointer(start: arena.baseAddress! + s.path, count: s.pathLength)
            }
            i = (i + 1) & mask
        }
    }

    public func lookup(_ name: String) -> String? {
        var n = name
        return n.withUTF8 { b in lookup(UnsafeRawBufferPointer(b)).map { String(decoding: $0, as: UTF8.self) } }
    }
}

#if canImport(Glibc)
import Glibc
#endif
