import Glibc

/// Reads release indexes: a whole index through a page loader (`walk`: an update's, fetching
/// what the page store lacks; `read`: an archive on disk), and an installed release's index from
/// the page store alone (no fetching): the chunk lists of its chunked files (chunks an update
/// can copy instead of fetching), and the pages it reaches (what the store keeps). Pages
/// missing from the store are skipped there.
package enum IndexReader {
    /// Pages to load, each with the archive offset of its stored bytes; the loader returns
    /// their bytes checked against their references, in the same order.
    package typealias Loader = ([(PageRef, UInt64)]) throws -> [[UInt8]]

    /// Walks the index the head locates, in its canonical order: the root (first in the index
    /// entry), the file-table pages in root order, then each chunked file's chunk pages; then
    /// the linked tree (`LinkedIndex`) the same way, its files marked `linked`. Checks
    /// that the pages lie inside the entry, that the file tables follow each other in path
    /// order, and that each chunked file's chunks add up to its size and stored size.
    /// `prefetch` is told every chunk page before they are loaded (to fetch the missing ones
    /// together).
    /// `chunksWanted` is given the files once their tables are read, and says which files'
    /// chunk lists to load (by number in path order; the default: all).
    ///
    /// A linked tree that contradicts itself or the main tree (`ERR_MANIFEST`), or a linked
    /// file whose chunks do not add up, costs only its chunks: the main tree is complete
    /// without it, so its files are read whole and `refused` is told why. With `strict`
    /// (`assetpatch verify`) it is an error like any other.
    package static func walk(_ index: IndexLocation, source shown: String, prefetch: ([(PageRef, UInt64)]) throws -> Void = { _ in },
                             chunksWanted: ([ManifestFile]) throws -> (Int) -> Bool = { _ in { _ in true } },
                             strict: Bool = false, refused: (String) -> Void = { _ in },
                             load: Loader) throws -> (files: IndexedFiles, chunks: [String: [ChunkRecord]]) {
        let end = index.offset + index.size
        var (files, at) = try table(index.root, at: index.offset, end: end, source: shown, load: load)
        // Where each chunked file's chunk pages lie (by its place in `files.chunked`): the main
        // tree's after its file-table pages, file by file in order; the linked tree's after its own.
        var pagesAt: [UInt64] = []
        pagesAt.reserveCapacity(files.chunked.count)
        for c in files.chunked {
            pagesAt.append(at)
            for r in c.pages { at += UInt64(r.compressedSize) }
        }
        guard at <= end else {
            throw AssetPatchError(.manifest, "\(shown): the index's pages run past its entry (\(at - index.offset) of \(index.size) bytes)")
        }
        if let linked = index.linked {
            do {
                (files.chunked, pagesAt) = try merge(linked, into: files, pagesAt, after: at, end: end - UInt64(index.groups?.compressedSize ?? 0),
                                                     source: shown, load: load)
            } catch let e as AssetPatchError where e.status == .manifest && !strict {
                refused("\(e.message); its files are fetched whole")
            }
        }
        // Only the wanted files' chunk pages are loaded.
        let wanted = try chunksWanted(files.files)
        var chunkRefs: [(PageRef, UInt64)] = []
        var loading: [Bool] = []
        for (n, c) in files.chunked.enumerated() {
            let want = wanted(c.file)
            loading.append(want)
            guard want else { continue }
            var place = pagesAt[n]
            for r in c.pages {
                chunkRefs.append((r, place))
                place += UInt64(r.compressedSize)
            }
        }
        // Every missing chunk page in one go (neighbours share requests), then decoded a few
        // hundred at a time: the raw pages of a large file are not all held at once.
        try prefetch(chunkRefs)
        var next = 0
        var chunks: [String: [ChunkRecord]] = [:]
        for (c, want) in zip(files.chunked, loading) where want {
            let f = files.files[c.file]
            var list: [ChunkRecord] = []
            var left = c.pages.count
            while left > 0 {
                let batch = min(left, 256)
                for bytes in try load(Array(chunkRefs[next..<(next + batch)])) {
                    guard case let .chunks(part) = try IndexPage.decode(bytes, source: shown) else {
                        throw AssetPatchError(.manifest, "\(shown): \"\(f.path)\" lists a page that is not a chunk list")
                    }
                    list += part
                }
                next += batch
                left -= batch
            }
            let size = list.reduce(UInt64(0)) { $0 + UInt64($1.size) }
            let compressed = list.reduce(UInt64(0)) { $0 + UInt64($1.compressedSize) }
            guard size == f.size, compressed == f.location?.compressedSize else {
                let what = "\(shown): the chunks of \"\(f.path)\" add up to \(size) bytes (\(compressed) stored), the file is \(f.size) (\(f.location?.compressedSize ?? 0) stored)"
                if c.linked && !strict {
                    refused(what + "; it is fetched whole")
                    continue
                }
                throw AssetPatchError(.manifest, what)
            }
            chunks[f.path] = list
        }
        return (files, chunks)
    }

    /// The linked tree (at or after `after`, the end of the main tree's pages) read and merged
    /// into `main`'s chunked files: each file it lists must be a file the main tree lists whole,
    /// deflated, with the same size, hash and location; its chunk pages lie after the linked
    /// tree's tables. The chunked files and where their pages lie, in file order.
    private static func merge(_ linked: LinkedIndex, into main: IndexedFiles, _ mainPagesAt: [UInt64], after: UInt64, end: UInt64,
                              source shown: String, load: Loader) throws -> ([IndexedFiles.Chunked], [UInt64]) {
        guard linked.offset >= after else {
            throw AssetPatchError(.manifest, "\(shown): the linked index overlaps the index's other pages")
        }
        let (list, tablesEnd) = try table(linked.root, at: linked.offset, end: end, source: shown, load: load)
        var at = tablesEnd
        var chunked: [IndexedFiles.Chunked] = [], pagesAt: [UInt64] = []
        var i = 0, m = 0, k = 0  // into main's files, main's chunked files, the linked tree's chunked files
        for (j, l) in list.files.enumerated() {
            while i < main.files.count && main.files[i].path.utf8.lexicographicallyPrecedes(l.path.utf8) { i += 1 }
            while m < main.chunked.count && main.chunked[m].file < i {
                chunked.append(main.chunked[m])
                pagesAt.append(mainPagesAt[m])
                m += 1
            }
            let chunkedInMain = m < main.chunked.count && main.chunked[m].file == i
            guard i < main.files.count, main.files[i] == l, !chunkedInMain, k < list.chunked.count, list.chunked[k].file == j,
                  l.location?.method == 8 else {
                throw AssetPatchError(.manifest, "\(shown): the linked index lists \"\(l.path)\" as the main index does not (a whole deflated file)")
            }
            chunked.append(IndexedFiles.Chunked(file: i, pages: list.chunked[k].pages, linked: true))
            pagesAt.append(at)
            for r in list.chunked[k].pages { at += UInt64(r.compressedSize) }
            k += 1
            i += 1
        }
        chunked += main.chunked[m...]
        pagesAt += mainPagesAt[m...]
        guard at <= end else {
            throw AssetPatchError(.manifest, "\(shown): the linked index's pages run past the index entry")
        }
        return (chunked, pagesAt)
    }

    /// A tree's root at `at` and its file-table pages after it, in root order: the files, in
    /// path order, and where the pages after them start.
    static func table(_ root: PageRef, at start: UInt64, end: UInt64, source shown: String, load: Loader) throws -> (files: IndexedFiles, end: UInt64) {
        let rootBytes = try load([(root, start)])[0]
        guard case let .root(fileRefs) = try IndexPage.decode(rootBytes, source: shown) else {
            throw AssetPatchError(.manifest, "\(shown): the index's root page is not a root page")
        }
        var at = start + UInt64(root.compressedSize)
        var located: [(PageRef, UInt64)] = []
        for r in fileRefs {
            located.append((r.page, at))
            at += UInt64(r.page.compressedSize)
        }
        guard at <= end else {
            throw AssetPatchError(.manifest, "\(shown): the index's file-table pages run past its entry (\(at - start) bytes from its root, \(end - start) left)")
        }
        var pages = try load(located)
        // Sized once: grown by doubling, the list of 100,000 files took 30 MB as it was read.
        var files = IndexedFiles()
        files.files.reserveCapacity(pages.reduce(0) { $0 + (IndexPage.fileCount($1) ?? 0) })
        for (i, table) in fileRefs.enumerated() {
            let bytes = pages[i]
            pages[i] = []  // each page's bytes go once its files are decoded
            guard case let .files(list) = try IndexPage.decode(bytes, source: shown, base: table.base) else {
                throw AssetPatchError(.manifest, "\(shown): the root lists a page that is not a file table")
            }
            if let last = files.files.last?.path, let first = list.first?.file.path, !last.utf8.lexicographicallyPrecedes(first.utf8) {
                throw AssetPatchError(.manifest, "\(shown): the index's file pages are out of order at \"\(first)\"")
            }
            for f in list { files.append(f) }
        }
        return (files, at)
    }

    /// The index of an archive on disk, each page checked against its reference; the chunk
    /// lists of the files `chunksWanted` takes (default: all).
    package static func read(archive path: String, _ index: IndexLocation, source: String,
                             chunksWanted: @escaping (Int) -> Bool = { _ in true }) throws
        -> (files: IndexedFiles, chunks: [String: [ChunkRecord]]) {
        let file = try File.openRead(path)
        let size = try file.size()
        return try walk(index, source: source, chunksWanted: { _ in chunksWanted }) { refs in
            try refs.map { ref, offset in
                guard offset <= size, UInt64(ref.compressedSize) <= size - offset else {
                    throw AssetPatchError(.manifest, "\(source): an index page lies past the archive's end")
                }
                let stored = try file.preadExactly(Int(ref.compressedSize), at: offset, what: "index page")
                return try IndexPage.unseal(stored, ref, source: source)
            }
        }
    }
}
