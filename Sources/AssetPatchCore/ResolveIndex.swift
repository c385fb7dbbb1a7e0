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
    public init(root: String, names: [String]) {
        self.root = root
        let rootBytes = Array(root.utf8)
        var arenaSize = 0
        for n in names { arenaSize += n.utf8.count * 2 + rootBytes.count + 2 }
        arena = .allocate(byteCount: max(arenaSize, 1), alignment: 8)
        var capacity = 16
        while capacity < names.count * 2 { capacity <<= 1 }
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: Slot(hash: 0, name: -1, nameLength: 0, path: 0, pathLength: 0))
        mask = capacity - 1
        var used = 0
        for n in names {
            var name = n
            name.withUTF8 { nameBytes in
                let h = ResolveIndex.hash(UnsafeRawBufferPointer(nameBytes))
                var i = Int(truncatingIfNeeded: h) & mask
                while slots[i].name >= 0 {
                    if slots[i].hash == h && bytesEqual(slots[i].name, slots[i].nameLength, UnsafeRawBufferPointer(nameBytes)) { return }
                    i = (i + 1) & mask
                }
                let nameOffset = used
                arena.baseAddress!.advanced(by: used).copyMemory(from: nameBytes.baseAddress!, byteCount: nameBytes.count)
                used += nameBytes.count
                let pathOffset = used
                rootBytes.withUnsafeBytes { arena.baseAddress!.advanced(by: used).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                used += rootBytes.count
                arena[used] = UInt8(ascii: "/")
                used += 1
                arena.baseAddress!.advanced(by: used).copyMemory(from: nameBytes.baseAddress!, byteCount: nameBytes.count)
                used += nameBytes.count
                arena[used] = 0
                used += 1
                slots[i] = Slot(hash: h, name: nameOffset, nameLength: nameBytes.count, path: pathOffset, pathLength: used - 1 - pathOffset)
                self.count += 1
            }
        }
    }

    /// Builds from NUL-separated names (the release's `names` file); nil if any is invalid.
    public convenience init?(root: String, nulSeparated bytes: [UInt8]) {
        var names: [String] = []
        var bad = false
        bytes.withUnsafeBytes { all in
            var start = 0
            for i in 0..<all.count where all[i] == 0 {
                let name = UnsafeRawBufferPointer(rebasing: all[start..<i])
                if !ResourceName.isValid(name) { bad = true; return }
                names.append(String(decoding: name, as: UTF8.self))
                start = i + 1
            }
            if start != all.count { bad = true }
        }
        if bad { return nil }
        self.init(root: root, names: names)
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
