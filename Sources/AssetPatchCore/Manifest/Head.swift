import Glibc

/// Where a format-2 release's index lies (the head's `index` object): the archive offset and
/// length of the `.assetpatch/index` entry's data, the root page's reference (the root lies
/// first in it), and the chunker's average chunk size (clients cut bundle files the same way to
/// find chunks they already have).
///
/// A format-2 head is a manifest without `files`: `{"format": 2, …, "archive": {…}, "index":
/// {"offset": N, "size": N, "root": "<sha256 hex>", "root_size": N, "chunk_size": 8192}}`.
package struct IndexLocation: Sendable, Equatable {
    package var offset: UInt64
    package var size: UInt64
    package var root: PageRef
    package var chunkSize: Int
    /// The group page (`GroupTable`), last in the index entry; nil: the release has no groups.
    package var groups: PageRef?
    /// The linked index (`LinkedIndex`): where its root lies in the archive, nil when no file's
    /// chunks share history.
    package var linked: LinkedIndex?
    /// Delta files from earlier releases (`DeltaSource`; empty: none).
    package var deltas: [DeltaSource] = []

    package init(offset: UInt64, size: UInt64, root: PageRef, chunkSize: Int, groups: PageRef? = nil, linked: LinkedIndex? = nil,
                 deltas: [DeltaSource] = []) {
        self.deltas = deltas
        self.offset = offset
        self.size = size
        self.root = root
        self.chunkSize = chunkSize
        self.groups = groups
        self.linked = linked
    }

    /// Where the group page's stored bytes lie in the archive: the index entry's last bytes.
    package var groupsOffset: UInt64? { groups.map { offset + size - UInt64($0.compressedSize) } }

    /// The name of the archive entry holding the index pages. A format-1 manifest published
    /// beside a head lists it as a file (so clients before 0.4 accept the archive); a format-2
    /// client never installs it as a resource.
    package static let entryName = ManifestFile.indexEntryName

    static func decode(_ v: JSON?, archiveSize: UInt64, source: String) throws -> IndexLocation {
        func fail(_ what: String) -> AssetPatchError { AssetPatchError(.manifest, "\(source): index.\(what)") }
        guard let v, v.isObject else { throw AssetPatchError(.manifest, "\(source): a format-2 manifest needs an \"index\" object") }
        func number(_ key: String) throws -> UInt64 {
            guard let n = v[key]?.int64, n >= 0 else { throw fail("\(key) must be a non-negative integer") }
            return UInt64(n)
        }
        let offset = try number("offset"), size = try number("size"), rootSize = try number("root_size")
        guard offset <= archiveSize, size <= archiveSize - offset else { throw fail("lies outside the archive") }
        guard rootSize > 0, rootSize <= size, rootSize <= UInt64(IndexPage.maxBytes) else { throw fail("root_size does not fit the index") }
        guard let rootHex = v["root"]?.string, Hex.isHex(rootHex, length: 64), let root = Hex.decode(rootHex) else {
            throw fail("root must be 64 hex digits")
        }
        let chunkSize = Int(try number("chunk_size"))
        guard Chunker(averageSize: chunkSize) != nil else { throw fail("chunk_size \(chunkSize) is not a power of two from 4 KiB to 1 MiB") }
        var groups: PageRef?
        if let g = v["groups"], g != .null {
            guard g.isObject, let hex = g["sha256"]?.string, Hex.isHex(hex, length: 64), let sha = Hex.decode(hex),
                  let n = g["size"]?.int64, n > 0, UInt64(n) <= size - rootSize, n <= Int64(IndexPage.maxBytes) else {
                throw fail("groups must be {\"sha256\": 64 hex digits, \"size\": its stored length, inside the index after the root}")
            }
            groups = PageRef(sha256: sha, compressedSize: UInt32(n))
        }
        var linked: LinkedIndex?
        if let l = v["linked"], l != .null {
            guard l.isObject, let hex = l["sha256"]?.string, Hex.isHex(hex, length: 64), let sha = Hex.decode(hex),
                  let n = l["size"]?.int64, n > 0, n <= Int64(IndexPage.maxBytes), let at = l["offset"]?.int64, at >= 0,
                  UInt64(at) >= offset + rootSize, UInt64(at) <= offset + size, UInt64(n) <= offset + size - UInt64(at) else {
                throw fail("linked must be {\"offset\": its archive offset, \"sha256\": 64 hex digits, \"size\": its stored length, inside the index after the root}")
            }
            linked = LinkedIndex(offset: UInt64(at), root: PageRef(sha256: sha, compressedSize: UInt32(n)))
        }
        return IndexLocation(offset: offset, size: size, root: PageRef(sha256: root, compressedSize: UInt32(rootSize)), chunkSize: chunkSize,
                             groups: groups, linked: linked, deltas: try DeltaSource.decodeList(v["deltas"], source: source))
    }

    func toJSON() -> JSON {
        .object([("offset", .int(Int64(offset))), ("size", .int(Int64(size))), ("root", .string(root.hex)),
                 ("root_size", .int(Int64(root.compressedSize))), ("chunk_size", .int(Int64(chunkSize)))]
                + (groups.map { [("groups", JSON.object([("sha256", .string($0.hex)), ("size", .int(Int64($0.compressedSize)))]))] } ?? [])
                + (linked.map { [("linked", JSON.object([("offset", .int(Int64($0.offset))), ("sha256", .string($0.root.hex)),
                                                         ("size", .int(Int64($0.root.compressedSize)))]))] } ?? [])
                + (deltas.isEmpty ? [] : [("deltas", JSON.array(deltas.map { $0.toJSON() }))]))
    }
}

/// The second tree of a release index, for files whose chunks share history (sync flushes:
/// `EntryCompressor`). Its root (a root page, at `offset` in the archive) lists file-table pages
/// of those files alone, with their chunk pages; the main tree lists the same files whole, with
/// the same locations, so clients before 0.5 (which read the main tree only) fetch them whole,
/// while 0.5 clients rebuild them chunk by chunk, each chunk decoded after the bytes before it.
/// Its pages follow the main tree's chunk pages in the index entry: the root, its file-table
/// pages in root order, then each file's chunk pages in path order.
package struct LinkedIndex: Sendable, Equatable {
    package var offset: UInt64
    package var root: PageRef

    package init(offset: UInt64, root: PageRef) {
        self.offset = offset
        self.root = root
    }
}

/// The head a format-1 manifest names (`head`): what the reference may hold and where it may
/// point.
enum NamedHead {
    /// What a manifest's `head` may hold (checked when decoded, and again when read back).
    static func isReference(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 2048 && !s.hasLineBreak && !s.contains("#")
    }

    /// The head `reference` names beside `manifest`: nil unless it is a file of the manifest's
    /// own directory (a name without "/", "\\", "?" or "%", not "." or ".."): on a shared
    /// origin (a path-style bucket, a code host) a reference elsewhere could name another
    /// tenant's file, and the client keeps it. Another file than the manifest itself.
    static func location(_ reference: String, beside manifest: Location) -> Location? {
        guard !reference.contains("/"), !reference.contains("\\"), !reference.contains("?"), !reference.contains("%"),
              !reference.contains(":"), reference != ".", reference != ".." else { return nil }
        let url = URLs.resolve(reference, against: manifest.url)
        guard let origin = URLs.origin(url), origin == URLs.origin(manifest.url), url != manifest.url,
              let location = Location(url), location.isFile == manifest.isFile else { return nil }
        return location
    }
}
