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
    /// entry), the file-table pages in root order, then each chunked file's chunk pages. Checks
    /// that the pages lie inside the entry, that the file tables follow each other in path
    /// order, and that each chunked file's chunks add up to its size and stored size.
    /// `prefetch` is told every chunk page before they are loaded (to fetch the missing ones
    /// together).
    /// `chunksWanted` is given the files once their tables are read, and says which files'
    /// chunk lists to load (by number in path order; the default: all).
    package static func walk(_ index: IndexLocation, source shown: String, prefetch: ([(PageRef, UInt64)]) throws -> Void = { _ in },
                             chunksWanted: ([IndexedFile]) throws -> (Int) -> Bool = { _ in { _ in true } },
                             load: Loader) throws -> (files: [IndexedFile], chunks: [String: [ChunkRecord]]) {
        let end = index.offset + index.size
        // The root, first in the index entry; the file-table pages after it, in root order.
        let rootBytes = try load([(index.root, index.offset)])[0]
        guard case let .root(fileRefs) = try IndexPage.decode(rootBytes, source: shown) else {
            throw AssetPatchError(.manifest, "\(shown): the index's root page is not a root page")
        }
        var at = index.offset + UInt64(index.root.compressedSize)
        var located: [(PageRef, UInt64)] = []
        for r in fileRefs {
            located.append((r.page, at))
            at += UInt64(r.page.compressedSize)
        }
        guard at <= end else {
            throw AssetPatchError(.manifest, "\(shown): the index's file-table pages run past its entry (\(at - index.offset) of \(index.size) bytes)")
        }
        var files: [IndexedFile] = []
        for (bytes, table) in zip(try load(located), fileRefs) {
            guard case let .files(list) = try IndexPage.decode(bytes, source: shown, base: table.base) else {
                throw AssetPatchError(.manifest, "\(shown): the root lists a page that is not a file table")
            }
            if let last = files.last?.file.path, let first = list.first?.file.path, !last.utf8.lexicographicallyPrecedes(first.utf8) {
                throw AssetPatchError(.manifest, "\(shown): the index's file pages are out of order at \"\(first)\"")
            }
            files += list
        }
        // The chunk pages after every file-table page: file by file, in order. Every page's
        // place counts; only the wanted files' pages are loaded.
        let wanted = try chunksWanted(files)
        var chunkRefs: [(PageRef, UInt64)] = []
        var loading: [Bool] = []
        for (i, f) in files.enumerated() {
            let want = wanted(i)
            loading.append(want)
            for r in f.chunkPages {
                if want { chunkRefs.append((r, at)) }
                at += UInt64(r.compressedSize)
            }
        }
        guard at <= end else {
            throw AssetPatchError(.manifest, "\(shown): the index's pages run past its entry (\(at - index.offset) of \(index.size) bytes)")
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
                throw AssetPatchError(.manifest, "\(shown): the chunks of \"\(f.file.path)\" add up to \(size) bytes (\(compressed) stored), the file is \(f.file.size) (\(f.file.location?.compressedSize ?? 0) stored)")
            }
            chunks[f.file.path] = list
        }
        return (files, chunks)
    }

    /// The whole index of an archive on disk, each page checked against its reference.
    package static func read(archive path: String, _ index: IndexLocation, source: String) throws
        -> (files: [IndexedFile], chunks: [String: [ChunkRecord]]) {
        let file = try File.openRead(path)
        let size = try file.size()
        return try walk(index, source: source) { refs in
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
