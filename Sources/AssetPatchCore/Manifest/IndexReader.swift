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
                             chunksWanted: ([IndexedFile]) throws -> (Int) -> Bool = { _ in { _ in true } },
                             strict: Bool = false, refused: (String) -> Void = { _ in },
                             load: Loader) throws -> (files: [IndexedFile], chunks: [String: [ChunkRecord]]) {
        let end = index.offset + index.size
        var (files, at) = try table(index.root, at: index.offset, end: end, source: shown, load: load)
        // Each chunked file's chunk pages, where they lie: the main tree's after its file-table
        // pages, file by file in order; the linked tree's after its own.
        var pagesAt: [UInt64?] = Array(repeating: nil, count: files.count)
        for (i, f) in files.enumerated() where !f.chunkPages.isEmpty {
            pagesAt[i] = at
            for r in f.chunkPages { at += UInt64(r.compressedSize) }
        }
        guard at <= end else {
            throw AssetPatchError(.manifest, "\(shown): the index's pages run past its entry (\(at - index.offset) of \(index.size) bytes)")
        }
        if let linked = index.linked {
            do {
                (files, pagesAt) = try merge(linked, into: files, pagesAt, after: at, end: end - UInt64(index.groups?.compressedSize ?? 0),
                                             source: shown, load: load)
            } catch let e as AssetPatchError where e.status == .manifest && !strict {
                refused("\(e.message); its files are fetched whole")
            }
        }
        // Only the wanted files' chunk pages are loaded.
        let wanted = try chunksWanted(files)
        var chunkRefs: [(PageRef, UInt64)] = []
        var loading: [Bool] = []
        for (i, f) in files.enumerated() {
            let want = wanted(i)
            loading.append(want)
            guard want, var place = pagesAt[i] else { continue }
            for r in f.chunkPages {
                chunkRefs.append((r, place))
                place += UInt64(r.compressedSize)
            }
        }
        // Every missing chunk page in one go (neighbours share requests), then decoded a few
        // hundred at a time: the raw pages of a large file are not all held at once.
        try prefetch(chunkRefs)
        var next = 0
        var chunks: [String: [ChunkRecord]] = [:]
        for (f, want) in zip(files, loading) where want && !f.chunkPages.isEmpty {
            var list: [ChunkRecord] = []
            var left = f.chunkPages.count
            while left > 0 {
                let batch = min(left, 256)
                for bytes in try load(Array(chunkRefs[next..<(next + batch)])) {
                    guard case let .chunks(part) = try IndexPage.decode(bytes, source: shown) else {
                        throw AssetPatchError(.manifest, "\(shown): \"\(f.file.path)\" lists a page that is not a chunk list")
                    }
                    list += part
                }
                next += batch
                left -= batch
            }
            let size = list.reduce(UInt64(0)) { $0 + UInt64($1.size) }
            let compressed = list.reduce(UInt64(0)) { $0 + UInt64($1.compressedSize) }
            guard size == f.file.size, compressed == f.file.location?.compressedSize else {
                let what = "\(shown): the chunks of \"\(f.file.path)\" add up to \(size) bytes (\(compressed) stored), the file is \(f.file.size) (\(f.file.location?.compressedSize ?? 0) stored)"
                if f.linked && !strict {
                    refused(what + "; it is fetched whole")
                    continue
                }
                throw AssetPatchError(.manifest, what)
            }
            chunks[f.file.path] = list
        }
        return (files, chunks)
    }

    /// The linked tree (at or after `after`, the end of the main tree's pages) read and merged
    /// into `files`: each file it lists must be a file the main tree lists whole, deflated, with
    /// the same size, hash and location; its chunk pages lie after the linked tree's tables.
    private static func merge(_ linked: LinkedIndex, into main: [IndexedFile], _ mainPagesAt: [UInt64?], after: UInt64, end: UInt64,
                              source shown: String, load: Loader) throws -> ([IndexedFile], [UInt64?]) {
        var files = main, pagesAt = mainPagesAt
        guard linked.offset >= after else {
            throw AssetPatchError(.manifest, "\(shown): the linked index overlaps the index's other pages")
        }
        let (list, tablesEnd) = try table(linked.root, at: linked.offset, end: end, source: shown, load: load)
        var at = tablesEnd
        var i = 0
        for l in list {
            while i < files.count && files[i].file.path.utf8.lexicographicallyPrecedes(l.file.path.utf8) { i += 1 }
            guard i < files.count, files[i].file == l.file, files[i].chunkPages.isEmpty, !l.chunkPages.isEmpty,
                  l.file.location?.method == 8 else {
                throw AssetPatchError(.manifest, "\(shown): the linked index lists \"\(l.file.path)\" as the main index does not (a whole deflated file)")
            }
            files[i].chunkPages = l.chunkPages
            files[i].linked = true
            pagesAt[i] = at
            for r in l.chunkPages { at += UInt64(r.compressedSize) }
            i += 1
        }
        guard at <= end else {
            throw AssetPatchError(.manifest, "\(shown): the linked index's pages run past the index entry")
        }
        return (files, pagesAt)
    }

    /// A tree's root at `at` and its file-table pages after it, in root order: the files, in
    /// path order, and where the pages after them start.
    static func table(_ root: PageRef, at start: UInt64, end: UInt64, source shown: String, load: Loader) throws -> (files: [IndexedFile], end: UInt64) {
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
        var files: [IndexedFile] = []
        files.reserveCapacity(pages.reduce(0) { $0 + (IndexPage.fileCount($1) ?? 0) })
        for (i, table) in fileRefs.enumerated() {
            let bytes = pages[i]
            pages[i] = []  // each page's bytes go once its files are decoded
            guard case let .files(list) = try IndexPage.decode(bytes, source: shown, base: table.base) else {
                throw AssetPatchError(.manifest, "\(shown): the root lists a page that is not a file table")
            }
            if let last = files.last?.file.path, let first = list.first?.file.path, !last.utf8.lexicographicallyPrecedes(first.utf8) {
                throw AssetPatchError(.manifest, "\(shown): the index's file pages are out of order at \"\(first)\"")
            }
            files += list
        }
        return (files, at)
    }

    /// The index of an archive on disk, each page checked against its reference; the chunk
    /// lists of the files `chunksWanted` takes (default: all).
    package static func read(archive path: String, _ index: IndexLocation, source: String,
                             chunksWanted: @escaping (Int) -> Bool = { _ in true }) throws
        -> (files: [IndexedFile], chunks: [String: [ChunkRecord]]) {
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
