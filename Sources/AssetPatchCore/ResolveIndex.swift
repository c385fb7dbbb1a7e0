/// An immutable name -> absolute path table for one directory of resources (a release or the
/// bundle). Lookups hash raw bytes and compare them in one contiguous arena: no allocation,
/// no system call. Built once, then shared by every resolving thread.
public final class ResolveIndex: @unchecked Sendable {  // immutable after init; the buffers are never written again
    /// 24 bytes, so that a table of 100,000 names stays small enough for the caches. The path
    /// is stored right after the name in the arena.
    struct Slot {
        var hash: UInt32       // the low half of the name's FNV-1a hash
        var nameLength: UInt16
        var pathLength: UInt16
        var name: Int          // offset of the name in the arena; -1: empty
        var tag: UInt16        // what the entry carries besides its path (the variant matched)

        init(hash: UInt64, name: Int, nameLength: Int, path: Int, pathLength: Int, tag: Int) {
            self.hash = UInt32(truncatingIfNeeded: hash)
            self.name = name
            self.nameLength = UInt16(truncatingIfNeeded: nameLength)
            self.pathLength = UInt16(truncatingIfNeeded: pathLength)
            self.tag = UInt16(truncatingIfNeeded: tag)
        }

        var path: Int { name + Int(nameLength) }
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
        slots.initialize(repeating: Slot(hash: 0, name: -1, nameLength: 0, path: 0, pathLength: 0, tag: 0))
        mask = capacity - 1
        var used = 0
        bytes.withUnsafeBytes { all in
            rootBytes.withUnsafeBytes { rootRaw in
                for r in ranges {
                    let nameBytes = UnsafeRawBufferPointer(rebasing: all[r])
                    insert(nameBytes, tag: 0, used: &used, pathLength: rootRaw.count + 1 + nameBytes.count) { at in
                        rootRaw.copyTo(at)
                        at.storeBytes(of: UInt8(ascii: "/"), toByteOffset: rootRaw.count, as: UInt8.self)
                        nameBytes.copyTo(at + rootRaw.count + 1)
                    }
                }
            }
        }
    }

    /// Adds `name` unless it is already there: the name, then its path (`writePath` fills
    /// `pathLength` bytes), then a NUL, at `used` in the arena.
    private func insert(_ nameBytes: UnsafeRawBufferPointer, tag: Int, used: inout Int, pathLength: Int,
                        writePath: (UnsafeMutableRawPointer) -> Void) {
        let h = ResolveIndex.hash(nameBytes)
        var i = Int(truncatingIfNeeded: h) & mask
        while slots[i].name >= 0 {
            if slots[i].hash == UInt32(truncatingIfNeeded: h) && bytesEqual(slots[i].name, Int(slots[i].nameLength), nameBytes) { return }
            i = (i + 1) & mask
        }
        let nameOffset = used
        nameBytes.copyTo(arena.baseAddress! + used)
        used += nameBytes.count
        writePath(arena.baseAddress! + used)
        used += pathLength
        arena[used] = 0
        used += 1
        slots[i] = Slot(hash: h, name: nameOffset, nameLength: nameBytes.count, path: nameOffset + nameBytes.count, pathLength: pathLength, tag: tag)
        count += 1
    }

    /// Entries to build a table from, their bytes back to back (no allocation per entry).
    struct Entries {
        var bytes: [UInt8] = []
        var spans: [(name: Range<Int>, path: Range<Int>, tag: Int)] = []

        mutating func append(name: UnsafeRawBufferPointer, path: UnsafeRawBufferPointer, tag: Int) {
            let n = bytes.count
            bytes.append(contentsOf: name)
            let p = bytes.count
            bytes.append(contentsOf: path)
            spans.append((n..<p, p..<bytes.count, tag))
        }
    }

    /// A table of `entries`, each a name with its own absolute path and tag; the first entry of
    /// a name wins.
    init(entries: Entries) {
        root = ""
        arena = .allocate(byteCount: max(entries.bytes.count + entries.spans.count, 1), alignment: 8)
        var capacity = 16
        while capacity < entries.spans.count * 2 { capacity <<= 1 }
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: Slot(hash: 0, name: -1, nameLength: 0, path: 0, pathLength: 0, tag: 0))
        mask = capacity - 1
        var used = 0
        entries.bytes.withUnsafeBytes { all in
            for e in entries.spans {
                let pathBytes = UnsafeRawBufferPointer(rebasing: all[e.path])
                insert(UnsafeRawBufferPointer(rebasing: all[e.name]), tag: e.tag, used: &used, pathLength: pathBytes.count) { pathBytes.copyTo($0) }
            }
        }
    }

    /// Every name with its absolute path.
    func forEach(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) {
        for i in 0...mask where slots[i].name >= 0 {
            let s = slots[i]
            body(UnsafeRawBufferPointer(start: arena.baseAddress! + s.name, count: Int(s.nameLength)),
                 UnsafeRawBufferPointer(start: arena.baseAddress! + s.path, count: Int(s.pathLength)))
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
        lookupTagged(name)?.path
    }

    /// The path for `name` and the entry's tag, or nil.
    @inline(__always)
    func lookupTagged(_ name: UnsafeRawBufferPointer) -> (path: UnsafeRawBufferPointer, tag: Int)? {
        let h = ResolveIndex.hash(name)
        var i = Int(truncatingIfNeeded: h) & mask
        while true {
            let s = slots[i]
            if s.name < 0 { return nil }
            if s.hash == UInt32(truncatingIfNeeded: h) && bytesEqual(s.name, Int(s.nameLength), name) {
                return (UnsafeRawBufferPointer(start: arena.baseAddress! + s.path, count: Int(s.pathLength)), Int(s.tag))
            }
            i = (i + 1) & mask
        }
    }

    public func lookup(_ name: String) -> String? {
        var n = name
        return n.withUTF8 { b in lookup(UnsafeRawBufferPointer(b)).map { String(decoding: $0, as: UTF8.self) } }
    }
}

extension UnsafeRawBufferPointer {
    /// Copies the bytes to `destination` (nothing for an empty buffer).
    @inline(__always)
    func copyTo(_ destination: UnsafeMutableRawPointer) {
        if let base = baseAddress, count > 0 { destination.copyMemory(from: base, byteCount: count) }
    }
}

#if canImport(Glibc)
import Glibc
#endif
