import Glibc

/// A delta file the head names (`index.deltas`): this release's changed files said against the
/// files of an earlier release (`from`: its archive's sha256), for clients that have that
/// release installed. The file is `deltas/<sha256>.delta` in the repository: its delta page
/// first (`page`: the sha256 of its decoded bytes and its stored length, raw-deflated like an
/// index page), then each delta's bytes in the page's order.
package struct DeltaSource: Sendable, Equatable {
    package var from: String
    package var url: String
    package var size: UInt64
    package var page: PageRef

    package init(from: String, url: String, size: UInt64, page: PageRef) {
        self.from = from
        self.url = url
        self.size = size
        self.page = page
    }

    /// A head names at most this many (one per earlier release a publisher keeps deltas from).
    package static let most = 8

    /// The entries this client reads: deltas are only ever a shortcut, so an entry it can't
    /// read (a later format's), and any past the first `most`, are passed over, not refused.
    static func decodeList(_ v: JSON?, source: String) throws -> [DeltaSource] {
        guard let list = v?.array else { return [] }
        return list.lazy.compactMap { d -> DeltaSource? in
            guard d.isObject, let from = d["from"]?.string, Hex.isHex(from, length: 64),
                  let url = d["url"]?.string, !url.isEmpty, url.utf8.count <= 2048, !url.hasLineBreak,
                  let size = d["size"]?.int64, size > 0, let hex = d["page"]?.string, Hex.isHex(hex, length: 64), let sha = Hex.decode(hex),
                  let pageSize = d["page_size"]?.int64, pageSize > 0, pageSize <= size, pageSize <= Int64(IndexPage.maxBytes) else {
                return nil
            }
            return DeltaSource(from: from, url: url, size: UInt64(size), page: PageRef(sha256: sha, compressedSize: UInt32(pageSize)))
        }.prefix(most).map { $0 }
    }

    func toJSON() -> JSON {
        .object([("from", .string(from)), ("url", .string(url)), ("size", .int(Int64(size))), ("page", .string(page.hex)),
                 ("page_size", .int(Int64(page.compressedSize)))])
    }
}

/// One delta of a delta file: the file whose sha256 and size are `target`'s, made from the file
/// whose are `base`'s by the `length` bytes at `offset` in the delta file (`Delta.swift`'s
/// instructions, raw-deflated).
package struct DeltaEntry: Sendable, Equatable {
    package var target: [UInt8]
    package var targetSize: UInt64
    package var base: [UInt8]
    package var baseSize: UInt64
    package var offset: UInt64 = 0
    package var length: UInt64

    package init(target: [UInt8], targetSize: UInt64, base: [UInt8], baseSize: UInt64, length: UInt64) {
        self.target = target
        self.targetSize = targetSize
        self.base = base
        self.baseSize = baseSize
        self.length = length
    }
}

/// The page at the start of a delta file: `APX1`, kind 5, a count, then for each delta in
/// order of its target's sha256 (each target once): the target's sha256 and size, the base's
/// sha256 and size, the delta's length. The deltas' bytes follow the page in that order and
/// fill the file exactly.
package enum DeltaPage {
    static let kind: UInt8 = 5
    /// The smallest entry: two hashes and three one-byte numbers.
    static let smallestEntry = 67

    package static func encode(_ entries: [DeltaEntry]) -> [UInt8] {
        var out = IndexPage.magic + [kind]
        out.putVarint(UInt64(entries.count))
        for e in entries {
            out += e.target
            out.putVarint(e.targetSize)
            out += e.base
            out.putVarint(e.baseSize)
            out.putVarint(e.length)
        }
        return out
    }

    /// The entries, each with its offset in the file; `ERR_MANIFEST` when the page is not one,
    /// its targets are out of order, or the deltas do not fill the file of `fileSize` bytes
    /// after the page's `pageSize` stored bytes.
    package static func decode(_ bytes: [UInt8], fileSize: UInt64, pageSize: UInt64, source: String) throws -> [DeltaEntry] {
        var r = PageReader(bytes: bytes, source: source)
        guard try r.bytes(4) == IndexPage.magic, try r.byte() == kind else { throw r.fail("not a delta page") }
        let n = try r.count(max: bytes.count / smallestEntry)
        var out: [DeltaEntry] = []
        out.reserveCapacity(n)
        var offset = pageSize
        for _ in 0..<n {
            let target = try r.bytes(32), targetSize = try r.varint()
            let base = try r.bytes(32), baseSize = try r.varint(), length = try r.varint()
            guard length > 0, length <= fileSize - min(fileSize, offset) else { throw r.fail("deltas past the file's \(fileSize) bytes") }
            if let last = out.last, !last.target.lexicographicallyPrecedes(target) { throw r.fail("targets out of order") }
            var e = DeltaEntry(target: target, targetSize: targetSize, base: base, baseSize: baseSize, length: length)
            e.offset = offset
            offset += length
            out.append(e)
        }
        try r.end()
        guard offset == fileSize else { throw r.fail("the deltas end at \(offset), the file at \(fileSize)") }
        return out
    }
}
