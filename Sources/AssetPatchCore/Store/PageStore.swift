import Glibc

/// The index pages a client has (`DATA_DIR/index/<sha256>`, each page's bytes): the pages of
/// the installed releases, and those fetched for an update not yet installed. A page is named
/// by its content, so one stored page serves every release that lists it; a new release costs
/// only its new pages. Pages are checked against their name when read, as when they arrived.
package struct PageStore {
    let dir: String
    /// A look that changes nothing (`status`, `inspect`): pages fetched are held here, not
    /// stored.
    private let memory: PageMemory?

    final class PageMemory: @unchecked Sendable {  // one updater's thread
        var pages: [String: [UInt8]] = [:]
    }

    init(_ store: Store, readOnly: Bool = false) {
        dir = store.root + "/index"
        memory = readOnly ? PageMemory() : nil
    }

    func path(_ ref: PageRef) -> String { dir + "/" + ref.hex }

    func has(_ ref: PageRef) -> Bool { memory?.pages[ref.hex] != nil || FS.isRegularFile(path(ref)) }

    /// The page's bytes, checked against its sha256; nil when missing or damaged (a damaged one
    /// is removed, and fetched again).
    func load(_ ref: PageRef) -> [UInt8]? {
        if let held = memory?.pages[ref.hex] { return held }
        guard let bytes = try? FS.readFile(path(ref), limit: IndexPage.maxBytes, followLinks: false) else { return nil }
        guard let d = try? Digest(.sha256) else { return nil }
        d.update(bytes)
        guard d.finalBytes() == ref.sha256 else {
            if memory == nil { try? FS.unlink(path(ref)) }
            return nil
        }
        return bytes
    }

    func save(_ bytes: [UInt8], _ ref: PageRef) throws {
        if let memory {
            memory.pages[ref.hex] = bytes
            return
        }
        // Not made durable: a page is checked against its name when read, and one a power cut
        // left short or gone is fetched again (two fsyncs a page were most of an index's time).
        // `index/` is made by the first page that finds it missing, not asked for at each.
        do {
            try FS.writeAtomically(path(ref), bytes, durable: false)
        } catch let error as AssetPatchError where error.errno == ENOENT {
            try FS.makeDirectories(dir)
            try FS.writeAtomically(path(ref), bytes, durable: false)
        }
    }

    /// Removes every page but `keep` (hex names).
    func prune(keeping keep: Set<String>) {
        for name in (try? FS.list(dir)) ?? [] where Hex.isHex(name, length: 64) && !keep.contains(name) {
            try? FS.unlink(dir + "/" + name)
        }
    }
}

/// What the stored pages of a release say, read without fetching anything (garbage collection,
/// chunk lookups).
extension PageStore {
    /// The chunks a stored chunk page lists; nil when it is missing or not a chunk page.
    func chunks(of ref: PageRef) -> [ChunkRecord]? {
        guard let bytes = load(ref), case let .chunks(list)? = try? IndexPage.decode(bytes, source: "index") else { return nil }
        return list
    }

    /// The hex names of the pages `root` reaches (those stored, and the references to others).
    func reachable(root: PageRef) -> Set<String> {
        var out = Set<String>()
        reachable(root: root, into: &out)
        return out
    }

    /// Adds the pages reachable from `root` to `out`. A files page already in `out` is not read
    /// again (its chunk pages are there already): releases share most of their pages, and each
    /// page read is a decode of up to hundreds of files.
    func reachable(root: PageRef, into out: inout Set<String>) {
        out.insert(root.hex)
        guard let bytes = load(root), case let .root(refs)? = try? IndexPage.decode(bytes, source: "index") else { return }
        var read = Set<String>()
        for f in chunkedFiles(root: root, skipping: out, read: &read) { for r in f.chunkPages { out.insert(r.hex) } }
        for r in refs { out.insert(r.page.hex) }
    }

    /// The files of the index under `root` that have chunk lists, chosen a page at a time (a
    /// release of 100,000 files is never held whole for the few an update looks for).
    func chunkedFiles(root: PageRef) -> [IndexedFile] {
        var read = Set<String>()
        return chunkedFiles(root: root, skipping: [], read: &read)
    }

    /// `chunkedFiles(root:)` from the files pages not in `skipping` nor in `read`, adding those
    /// it reads to `read`: what several indexes sharing pages hold, each page decoded once.
    func chunkedFiles(root: PageRef, skipping: Set<String>, read: inout Set<String>) -> [IndexedFile] {
        guard let bytes = load(root), case let .root(refs)? = try? IndexPage.decode(bytes, source: "index") else { return [] }
        var out: [IndexedFile] = []
        for r in refs where !skipping.contains(r.page.hex) && read.insert(r.page.hex).inserted {
            guard let b = load(r.page), case let .files(list)? = try? IndexPage.decode(b, source: "index", base: r.base, onlyChunked: true) else { continue }
            out += list
        }
        return out
    }
}
