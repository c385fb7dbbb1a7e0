import Glibc

/// Builds a release's index (`IndexPage`): the file table cut into pages, each chunked file's
/// chunk list cut into pages, the root listing the file-table pages, all stored in canonical
/// order as the bytes of the archive's `.assetpatch/index` entry.
///
/// Page boundaries follow the content so that a change rewrites only the pages around it (and
/// file-table pages hold offsets relative to their first file, so a file that changes size
/// leaves the pages after it alone): a
/// file-table page ends after a file whose path hashes (FNV-1a) to a multiple of the average
/// (256 files), a chunk page after a chunk whose hash's first two bytes are a multiple of the
/// average (64 chunks), within a minimum and a maximum. At those averages a page is about 12
/// KiB of file table (paths compress, hashes don't) or 2.3 KiB of chunk list (a MiB of file).
package enum IndexBuilder {
    static let filesPerPage = (min: 32, average: 256, max: 2048)
    static let chunksPerPage = (min: 8, average: 64, max: 512)

    package struct Built {
        package var root: PageRef
        /// The pages' stored forms in canonical order: the index entry's bytes.
        package var bytes: [UInt8]
        package var pages: Int
        /// The linked tree's root and where it lies in `bytes`; nil when no file is linked.
        package var linked: (offset: UInt64, root: PageRef)?
    }

    /// `files` in path order (bytes), each with its chunks when it is chunked; `linked` says
    /// which (by number) have chunks that share history. Those are listed whole in the main tree
    /// and with their chunks in the linked tree (`LinkedIndex`), whose pages follow the main
    /// tree's.
    package static func build(_ files: [(file: ManifestFile, chunks: [ChunkRecord])], linked: (Int) -> Bool = { _ in false }) throws -> Built {
        let isLinked = files.indices.map { !files[$0].chunks.isEmpty && linked($0) }
        let main = try tree(files.enumerated().map { i, f in (f.file, isLinked[i] ? [] : f.chunks) })
        let linkedFiles = files.indices.filter { isLinked[$0] }.map { files[$0] }
        guard !linkedFiles.isEmpty else { return Built(root: main.root, bytes: main.bytes, pages: main.pages) }
        let second = try tree(linkedFiles)
        return Built(root: main.root, bytes: main.bytes + second.bytes, pages: main.pages + second.pages,
                     linked: (UInt64(main.bytes.count), second.root))
    }

    /// One tree: the root, the file-table pages in root order, then each chunked file's chunk
    /// pages, file by file.
    private static func tree(_ files: [(file: ManifestFile, chunks: [ChunkRecord])]) throws -> (root: PageRef, bytes: [UInt8], pages: Int) {
        var chunkPages: [[(PageRef, [UInt8])]] = []
        var indexed: [IndexedFile] = []
        for (file, chunks) in files {
            var pages: [(PageRef, [UInt8])] = []
            for group in split(chunks, chunksPerPage, { $0.id.leading16 }, boundary: { $0 % UInt16(chunksPerPage.average) == 0 }) {
                pages.append(try IndexPage.chunks(group).sealed())
            }
            chunkPages.append(pages)
            indexed.append(IndexedFile(file: file, chunkPages: pages.map(\.0)))
        }
        var filePages: [(PageRef, [UInt8])] = []
        var tables: [FileTableRef] = []
        var grouped: [[Int]] = []
        for group in split(Array(indexed.indices), filesPerPage, { fnv1a(indexed[$0].file.path) }, boundary: { $0 % UInt64(filesPerPage.average) == 0 }) {
            let files = group.map { indexed[$0] }
            let page = try IndexPage.files(files).sealed()
            filePages.append(page)
            tables.append(FileTableRef(page: page.ref, base: IndexPage.base(of: files)))
            grouped.append(group)
        }
        let root = try IndexPage.root(tables).sealed()
        var bytes = root.stored
        for p in filePages { bytes += p.1 }
        for group in grouped {
            for i in group { for p in chunkPages[i] { bytes += p.1 } }
        }
        return (root.ref, bytes, 1 + filePages.count + chunkPages.reduce(0) { $0 + $1.count })
    }

    /// Cuts `items` after each item whose key `boundary` accepts, within the page bounds.
    static func split<T, K>(_ items: [T], _ bounds: (min: Int, average: Int, max: Int), _ key: (T) -> K, boundary: (K) -> Bool) -> [[T]] {
        var out: [[T]] = []
        var current: [T] = []
        for item in items {
            current.append(item)
            if current.count >= bounds.max || (current.count >= bounds.min && boundary(key(item))) {
                out.append(current)
                current = []
            }
        }
        if !current.isEmpty { out.append(current) }
        return out
    }

    static func fnv1a(_ s: String) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for b in s.utf8 { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
        return h
    }
}
