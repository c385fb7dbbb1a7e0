import Glibc

/// Reads an installed release's index from the page store alone (no fetching): the chunk lists
/// of its chunked files (chunks an update can copy instead of fetching), and the pages it
/// reaches (what the store keeps). Pages missing from the store are skipped.
enum IndexReader {
    /// Each chunked file's path and chunks, for the files whose chunk pages are all stored.
    static func chunkLists(root: PageRef, pages: PageStore) -> [(path: String, chunks: [ChunkRecord])] {
        var out: [(path: String, chunks: [ChunkRecord])] = []
        for f in files(root: root, pages: pages) where !f.chunkPages.isEmpty {
            var list: [ChunkRecord] = []
            for r in f.chunkPages {
                guard let bytes = pages.load(r), case let .chunks(part)? = try? IndexPage.decode(bytes, source: "index") else {
                    list = []
                    break
                }
                list += part
            }
            if !list.isEmpty { out.append((f.file.path, list)) }
        }
        return out
    }

    /// The hex names of the pages `root` reaches (those stored, and the references to others).
    static func reachable(root: PageRef, pages: PageStore) -> Set<String> {
        var out: Set<String> = [root.hex]
        guard let bytes = pages.load(root), case let .root(refs)? = try? IndexPage.decode(bytes, source: "index") else { return out }
        for r in refs { out.insert(r.page.hex) }
        for f in files(root: root, pages: pages) { for r in f.chunkPages { out.insert(r.hex) } }
        return out
    }

    static func files(root: PageRef, pages: PageStore) -> [IndexedFile] {
        guard let bytes = pages.load(root), case let .root(refs)? = try? IndexPage.decode(bytes, source: "index") else { return [] }
        var out: [IndexedFile] = []
        for r in refs {
            guard let b = pages.load(r.page), case let .files(list)? = try? IndexPage.decode(b, source: "index", base: r.base) else { continue }
            out += list
        }
        return out
    }
}
