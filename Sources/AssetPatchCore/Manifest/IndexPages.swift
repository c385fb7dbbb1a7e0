import Glibc

/// A reference to one index page: the sha256 of its bytes, and the length of its compressed
/// form in the archive's index entry (where it lies follows from the pages before it).
package struct PageRef: Sendable, Hashable {
    package var sha256: [UInt8]
    package var compressedSize: UInt32

    package init(sha256: [UInt8], compressedSize: UInt32) {
        self.sha256 = sha256
        self.compressedSize = compressedSize
    }

    package var hex: String { Hex.encode(sha256) }
}

/// The root's reference to one file-table page, with the archive offset its files' locations
/// count from: the page itself holds offsets relative to it, so a file that grows or shrinks
/// changes its own page and the root, never the pages of the files after it.
package struct FileTableRef: Sendable, Hashable {
    package var page: PageRef
    package var base: UInt64

    package init(page: PageRef, base: UInt64) {
        self.page = page
        self.base = base
    }
}

/// One file of a release as the index lists it: what a format-1 manifest's `files` entry says,
/// and for a chunked file the pages listing its chunks.
package struct IndexedFile: Sendable, Equatable {
    package var file: ManifestFile
    package var chunkPages: [PageRef]
    /// Its chunks share history (`IndexLocation.linked`): a chunk decodes given the 32 KiB of
    /// the file before it. Not in the page's bytes: the index the file is listed in says it.
    package var linked: Bool

    package init(file: ManifestFile, chunkPages: [PageRef] = [], linked: Bool = false) {
        self.file = file
        self.chunkPages = chunkPages
        self.linked = linked
    }
}

/// The release index of a format-2 release: its description in pages, each named by its
/// sha256, so that a client fetches only the pages it does not have (Git's and OSTree's trees,
/// TUF's hashed targets). The signed head names the root page; the root lists the file-table
/// pages (each with the archive offset its locations count from); a file-table page lists
/// files, and a chunked file its chunk pages; a chunk page lists chunks (no offsets: a chunk's
/// place follows from the chunks before it in its file's entry). Every page is checked against the reference that names it, so every byte chains to
/// the signature.
///
/// Pages are binary (`APX1`, a kind byte, a LEB128 count, the entries; hashes as 32 raw
/// bytes, numbers as LEB128) and stored in the archive's `.assetpatch/index` entry, each raw
/// deflated on its own, in canonical order: the root, the file-table pages, then each chunked
/// file's chunk pages, file by file. Page boundaries follow the content (a file's path hash, a
/// chunk's hash), so a change rewrites only the pages around it.
package enum IndexPage: Equatable {
    case root([FileTableRef])
    /// Files with their locations; encoded relative to the lowest local-header offset among
    /// them (the root's `base`), decoded with the base added back.
    case files([IndexedFile])
    case chunks([ChunkRecord])

    static let magic: [UInt8] = Array("APX1".utf8)
    /// Bounds a page's decoded size: a lying reference can't make a client allocate more.
    package static let maxBytes = 8 << 20

    // MARK: Encoding

    package func encode() -> [UInt8] {
        var out = IndexPage.magic
        switch self {
        case let .root(refs):
            out.append(1)
            out.putVarint(UInt64(refs.count))
            for r in refs {
                out.putRef(r.page)
                out.putVarint(r.base)
            }
        case let .files(files):
            out.append(2)
            out.putVarint(UInt64(files.count))
            let base = IndexPage.base(of: files)
            for f in files {
                let path = Array(f.file.path.utf8)
                out.putVarint(UInt64(path.count))
                out += path
                out.putVarint(f.file.size)
                out += Hex.decode(f.file.sha256) ?? []
                let l = f.file.location!
                out.putVarint(l.headerOffset - base)
                out.putVarint(l.dataOffset - l.headerOffset)
                out.putVarint(l.compressedSize)
                out.append(UInt8(l.method))
                out.putVarint(UInt64(f.chunkPages.count))
                for r in f.chunkPages { out.putRef(r) }
            }
        case let .chunks(chunks):
            out.append(3)
            out.putVarint(UInt64(chunks.count))
            for c in chunks {
                out += c.id.bytes
                out.putVarint(UInt64(c.size))
                out.putVarint(UInt64(c.compressedSize))
            }
        }
        return out
    }

    /// The offset a file-table page's locations count from: its lowest local-header offset.
    package static func base(of files: [IndexedFile]) -> UInt64 {
        files.compactMap { $0.file.location?.headerOffset }.min() ?? 0
    }

    // MARK: Decoding

    /// The fewest bytes a page's header (magic, kind, count) and each of its entries take: a
    /// reader sizes its lists by a page's count, never past what its bytes could hold.
    static let headerBytes = 6
    static let smallestEntry: [UInt8: Int] = [1: 34, 2: 40, 3: 34]

    /// The files a file-table page says it lists (never more than its bytes could hold),
    /// without decoding them; nil when it is not a file-table page.
    package static func fileCount(_ bytes: [UInt8]) -> Int? {
        var r = PageReader(bytes: bytes, source: "")
        guard bytes.count >= headerBytes, Array(bytes[0..<4]) == magic, bytes[4] == 2 else { return nil }
        r.at = 5
        return (try? r.count(max: bytes.count)).map { min($0, room(bytes, kind: 2)) }
    }

    /// How many entries of `kind` the bytes of a page could hold at most.
    private static func room(_ bytes: [UInt8], kind: UInt8) -> Int {
        max(0, bytes.count - headerBytes) / (smallestEntry[kind] ?? 1)
    }

    /// Decodes a page whose bytes were checked against their reference; a file-table page's
    /// locations get `base` (the root's) added. A page that does not decode is the publisher's
    /// fault: `ERR_MANIFEST`. `onlyChunked`: a file-table page lists only its files with chunk
    /// pages, the others read past (their numbers and order still checked, their paths not
    /// made into strings): what walks over pages already checked once look for.
    package static func decode(_ bytes: [UInt8], source: String, base: UInt64 = 0, onlyChunked: Bool = false) throws -> IndexPage {
        var r = PageReader(bytes: bytes, source: source)
        guard bytes.count >= 5, Array(bytes[0..<4]) == magic else { throw r.fail("not an index page") }
        r.at = 4
        let kind = try r.byte()
        let count = try r.count(max: bytes.count)
        switch kind {
        case 1:
            var refs: [FileTableRef] = []
            refs.reserveCapacity(min(count, room(bytes, kind: 1)))
            for _ in 0..<count { refs.append(FileTableRef(page: try r.ref(), base: try r.varint())) }
            try r.end()
            return .root(refs)
        case 2:
            var files: [IndexedFile] = []
            files.reserveCapacity(onlyChunked ? 0 : min(count, room(bytes, kind: 2)))
            var previous: Range<Int>?
            for _ in 0..<count {
                let name = try r.skip(try r.count(max: ResourceName.maxLength))
                if let previous, !bytes[previous].lexicographicallyPrecedes(bytes[name]) {
                    throw r.fail("paths out of order at \"\(String(decoding: bytes[name], as: UTF8.self))\"")
                }
                previous = name
                let size = try r.varint()
                let digest = try r.skip(32)
                let (header, o0) = base.addingReportingOverflow(try r.varint())
                let (data, o1) = header.addingReportingOverflow(try r.varint())
                let compressed = try r.varint()
                let method = UInt16(try r.byte())
                guard !o0, !o1, data - header >= 30, data <= UInt64(Int64.max), method == 0 || method == 8, compressed <= UInt64(Int64.max) - data else {
                    throw r.fail("\"\(String(decoding: bytes[name], as: UTF8.self))\" has an impossible location")
                }
                let pages = try r.count(max: bytes.count)
                if onlyChunked && pages == 0 { continue }
                guard let path = String(validating: bytes[name], as: UTF8.self), ResourceName.isValid(path) else {
                    throw r.fail("unsafe path \"\(String(decoding: bytes[name], as: UTF8.self))\"")
                }
                var chunkPages: [PageRef] = []
                chunkPages.reserveCapacity(pages)
                for _ in 0..<pages { chunkPages.append(try r.ref()) }
                let location = ArchiveLocation(headerOffset: header, dataOffset: data, compressedSize: compressed, method: method)
                files.append(IndexedFile(file: ManifestFile(path: path, size: size, digest: Sha256(bytes: bytes[digest])!, location: location),
                                         chunkPages: chunkPages))
            }
            try r.end()
            return .files(files)
        case 3:
            var chunks: [ChunkRecord] = []
            chunks.reserveCapacity(min(count, room(bytes, kind: 3)))
            for _ in 0..<count {
                let sha = try r.bytes(32)
                let size = try r.varint(), compressed = try r.varint()
                guard size > 0, size <= UInt64(IndexPage.maxChunkBytes), compressed <= UInt64(IndexPage.maxChunkBytes) + 1024 else {
                    throw r.fail("a chunk of \(size) bytes (\(compressed) compressed)")
                }
                chunks.append(ChunkRecord(sha256: sha, size: UInt32(size), compressedSize: UInt32(compressed)))
            }
            try r.end()
            return .chunks(chunks)
        default:
            throw r.fail("unknown page kind \(kind)")
        }
    }

    /// The largest chunk a page may list: four times the largest average size.
    package static let maxChunkBytes = 4 << 20

    // MARK: Compressed form

    /// The page's bytes as stored in the archive, and the reference naming them.
    package func sealed() throws -> (ref: PageRef, stored: [UInt8]) {
        try IndexPage.seal(encode())
    }

    /// A page's decoded `bytes` as stored, and the reference naming them.
    package static func seal(_ bytes: [UInt8]) throws -> (ref: PageRef, stored: [UInt8]) {
        let stored = try RawDeflate.compress(bytes, level: 9)
        let d = try Digest(.sha256)
        d.update(bytes)
        return (PageRef(sha256: d.finalBytes(), compressedSize: UInt32(stored.count)), stored)
    }

    /// The bytes of a stored page, checked against its reference: inflated (never past
    /// `maxBytes`), the stream ending exactly at the stored bytes' end, the sha256 matching.
    /// A mismatch means the archive is not what the signed head describes: `ERR_INTEGRITY`.
    package static func unseal(_ stored: [UInt8], _ ref: PageRef, source: String) throws -> [UInt8] {
        guard stored.count == Int(ref.compressedSize) else {
            throw AssetPatchError(.integrity, "\(source): index page \(ref.hex.prefix(16)) is \(stored.count) bytes, its reference says \(ref.compressedSize)")
        }
        guard let bytes = try? RawDeflate.decompress(stored, limit: maxBytes) else {
            throw AssetPatchError(.integrity, "\(source): index page \(ref.hex.prefix(16)) does not inflate")
        }
        let d = try Digest(.sha256)
        d.update(bytes)
        guard d.finalBytes() == ref.sha256 else {
            throw AssetPatchError(.integrity, "\(source): index page \(ref.hex.prefix(16)) does not match its sha256")
        }
        return bytes
    }
}

/// Reads a page's fields, every read bounds-checked.
struct PageReader {
    let bytes: [UInt8]
    let source: String
    var at = 0

    init(bytes: [UInt8], source: String) {
        self.bytes = bytes
        self.source = source
    }

    func fail(_ what: String) -> AssetPatchError { AssetPatchError(.manifest, "\(source): index page: \(what)") }

    mutating func byte() throws -> UInt8 {
        guard at < bytes.count else { throw fail("truncated") }
        defer { at += 1 }
        return bytes[at]
    }

    mutating func bytes(_ n: Int) throws -> [UInt8] {
        Array(bytes[try skip(n)])
    }

    /// The range of the next `n` bytes, read past.
    mutating func skip(_ n: Int) throws -> Range<Int> {
        guard n >= 0, n <= bytes.count - at else { throw fail("truncated") }
        defer { at += n }
        return at..<(at + n)
    }

    mutating func varint() throws -> UInt64 {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 7) {
            let b = try byte()
            value |= UInt64(b & 0x7F) << UInt64(shift)
            if b & 0x80 == 0 {
                if shift == 63 && b > 1 { throw fail("a number past 64 bits") }
                return value
            }
        }
        throw fail("a number past 64 bits")
    }

    /// A count of items that each take at least one byte: no more than the bytes left.
    mutating func count(max: Int) throws -> Int {
        let n = try varint()
        guard n <= UInt64(Swift.max(0, Swift.min(max, bytes.count - at + 1))) else { throw fail("a count of \(n) past the page's end") }
        return Int(n)
    }

    mutating func ref() throws -> PageRef {
        let sha = try bytes(32)
        let size = try varint()
        guard size > 0, size <= UInt64(IndexPage.maxBytes) else { throw fail("a page reference of \(size) bytes") }
        return PageRef(sha256: sha, compressedSize: UInt32(size))
    }

    func end() throws {
        guard at == bytes.count else { throw fail("\(bytes.count - at) bytes after the last entry") }
    }
}

extension Array where Element == UInt8 {
    mutating func putVarint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        append(UInt8(v))
    }

    mutating func putRef(_ r: PageRef) {
        self += r.sha256
        putVarint(UInt64(r.compressedSize))
    }
}
