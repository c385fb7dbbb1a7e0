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
        try FS.makeDirectories(dir)
        try FS.writeAtomically(path(ref), bytes)
    }

    /// Removes every page but `keep` (hex names).
    func prune(keeping keep: Set<String>) {
        for name in (try? FS.list(dir)) ?? [] where Hex.isHex(name, length: 64) && !keep.contains(name) {
            try? FS.unlink(dir + "/" + name)
        }
    }
}
