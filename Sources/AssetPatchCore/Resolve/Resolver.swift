/// What resolving reads: the active release's index, the bundle's, and the variant order.
/// Immutable; the client replaces it as a whole (one reference swap under a short lock) when a
/// release activates or the variants change, so a lookup costs one retain/release and never
/// waits for an update.
final class ResolveView: @unchecked Sendable {  // immutable after init
    let release: NameTable?
    let bundle: NameTable?
    /// The variant suffixes in order; an empty one is the plain name.
    let variants: [[UInt8]]
    let activeVersion: Int64
    /// Every name a lookup can succeed for, resolved ahead for this variant order: its path and
    /// the index of the variant that matched. A lookup is then one hash, one probe, one compare
    /// and one copy, whatever the variants. Built with the view, before it is swapped in, so
    /// resolvers never wait for it. nil for the plain name only: the release's and the bundle's
    /// own indexes answer then (the open builds nothing more).
    let table: NameTable?
    /// The release's on-demand groups by root index ("" for the base's roots), and which of
    /// those roots are not on disk: a name found there is not local (`Found.notLocal`), never
    /// resolved to the bundle or an older release instead. The release's roots come first in
    /// every table, so one index serves the release's own table and the one resolved ahead.
    let groupNames: [String]
    private let absent: UnsafeMutableBufferPointer<Bool>

    init(release: NameTable?, bundle: NameTable?, variants: [[UInt8]], activeVersion: Int64,
         groupNames: [String] = [], absent: Set<Int> = [], table: NameTable?? = nil) {
        self.release = release
        self.bundle = bundle
        self.variants = variants
        self.activeVersion = activeVersion
        self.groupNames = groupNames
        self.absent = .allocate(capacity: groupNames.count)
        for i in groupNames.indices { self.absent[i] = absent.contains(i) }
        self.table = table ?? (variants == [[]] ? nil : ResolveView.resolveAhead(release: release, bundle: bundle, variants: variants))
    }

    deinit { absent.deallocate() }

    /// Whether the release's on-demand group `name` is on disk in this view.
    func isLocal(group name: String) -> Bool {
        guard let i = groupNames.firstIndex(of: name) else { return false }
        return !absent[i]
    }

    /// The same names with the groups at root indexes `absent` not on disk.
    func with(absent: Set<Int>) -> ResolveView {
        ResolveView(release: release, bundle: bundle, variants: variants, activeVersion: activeVersion, groupNames: groupNames,
                    absent: absent, table: .some(table))
    }

    /// For each variant in order and each source (release before bundle), the names whose
    /// candidate with that variant is a file of the source, entered in that order: the first
    /// entry of a name wins, exactly as trying the candidates one by one would decide.
    static func resolveAhead(release: NameTable?, bundle: NameTable?, variants: [[UInt8]]) -> NameTable {
        var entries = NameTable.Entries()
        let sources = [release, bundle].compactMap { $0 }
        // Each source's roots after the ones before it: the release's first.
        var firstRoot: [Int] = []
        var roots: [String] = []
        for index in sources {
            firstRoot.append(roots.count)
            roots += index.roots
        }
        for (i, v) in variants.enumerated() {
            for (k, index) in sources.enumerated() {
                index.forEachFile { file, r in
                    let root = firstRoot[k] + r
                    if v.isEmpty {
                        entries.append(name: file, file: file, root: root, tag: i)
                        return
                    }
                    for name in requestedNames(for: file, variant: v) {
                        name.withUnsafeBytes { entries.append(name: $0, file: file, root: root, tag: i) }
                    }
                }
            }
        }
        return NameTable(roots: roots, entries: entries)
    }

    /// The names whose candidate with the non-empty `variant` is `file`: at most two (the suffix
    /// inserted at the end, or before the extension), each confirmed by applying the variant
    /// forward. (With the empty variant the name is the file itself.)
    static func requestedNames(for file: UnsafeRawBufferPointer, variant: [UInt8]) -> [[UInt8]] {
        let n = file.count, k = variant.count
        func endsWith(_ end: Int) -> Bool {  // file[end - k ..< end] == variant
            guard end >= k else { return false }
            for j in 0..<k where file[end - k + j] != variant[j] { return false }
            return true
        }
        var out: [[UInt8]] = []
        func confirm(_ name: [UInt8]) {
            guard !name.isEmpty, name.withUnsafeBytes({ ResourceName.isValid($0) }) else { return }
            let forward: [UInt8] = name.withUnsafeBytes { nb in
                variant.withUnsafeBytes { v in
                    [UInt8](unsafeUninitializedCapacity: nb.count + v.count) { buffer, count in
                        let at = ResourceName.suffixInsertionPoint(nb)
                        ResourceName.beginVariants(of: nb, at: at, into: UnsafeMutableRawPointer(buffer.baseAddress!))
                        count = ResourceName.variant(of: nb, at: at, suffix: v, into: UnsafeMutableRawPointer(buffer.baseAddress!)).count
                    }
                }
            }
            if forward.elementsEqual(file) && !out.contains(name) { out.append(name) }
        }
        // At the end: file = name + variant.
        if n > k && endsWith(n) { confirm(Array(file[0..<(n - k)])) }
        // Before the extension: file = stem + variant + ".ext", the extension from the last dot.
        var dot = n - 1
        while dot >= 0 && file[dot] != UInt8(ascii: ".") && file[dot] != UInt8(ascii: "/") { dot -= 1 }
        if dot >= 0, file[dot] == UInt8(ascii: "."), endsWith(dot) {
            confirm(Array(file[0..<(dot - k)]) + Array(file[dot..<n]))
        }
        return out
    }

    /// A view with another release (its group names, and the root indexes of its groups not
    /// on disk), other variants, or another version.
    func with(release: NameTable?? = nil, variants: [[UInt8]]? = nil, activeVersion: Int64? = nil,
              groups: (names: [String], absent: Set<Int>)? = nil) -> ResolveView {
        let keepGroups = release == nil && groups == nil
        return ResolveView(release: release ?? self.release, bundle: bundle, variants: variants ?? self.variants,
                           activeVersion: activeVersion ?? self.activeVersion,
                           groupNames: groups?.names ?? (keepGroups ? groupNames : []),
                           absent: groups?.absent ?? (keepGroups ? Set(groupNames.indices.filter { absent[$0] }) : []))
    }

    @inline(__always)
    private func lookup(_ name: UnsafeRawBufferPointer) -> NameTable.Hit? {
        if let table { return table.lookup(name) }
        if let r = release, let hit = r.lookup(name) { return hit }
        // The bundle's own table: root 0 is the base's of the release too, never absent.
        if let b = bundle, let hit = b.lookup(name) { return hit }
        return nil
    }

    /// What a lookup found.
    enum Found { case ok, notFound, range, notLocal }

    /// Resolves `name` (raw UTF-8): for each variant in order, the release, then the bundle
    /// (looked up in the table resolved ahead). Writes the NUL-terminated absolute path into
    /// `out` when it fits; `length` gets the path's length without the NUL (also for `.range`,
    /// so a caller can size its buffer); `variant` the index of the variant that matched.
    /// Non-generic, and allocation- and syscall-free: the hot path of every host. The name is
    /// not validated here: every name a table holds was, when it was entered, so a name found
    /// is valid; `error` validates the names that were not.
    @inline(__always)
    func resolve(_ name: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer?, capacity: Int,
                 length: inout Int, variant: inout Int) -> Found {
        guard let hit = lookup(name) else { return .notFound }
        if hit.rootIndex < absent.count && absent[hit.rootIndex] {
            variant = hit.rootIndex  // the error names its group
            return .notLocal
        }
        length = hit.count
        variant = hit.tag
        guard let out, capacity > hit.count else { return .range }
        hit.copy(to: out)
        return .ok
    }

    /// The error for a lookup of `name` that did not succeed: `.argument` for an invalid name,
    /// else `.notFound`, or `.range` when the path of `length` bytes does not fit `capacity`.
    @inline(never)
    func error(_ found: Found, name: UnsafeRawBufferPointer, length: Int, capacity: Int, root: Int) -> AssetPatchError {
        let text = String(decoding: name, as: UTF8.self)
        if found == .notLocal {
            let group = root < groupNames.count ? groupNames[root] : "?"
            return AssetPatchError(.notLocal, "\"\(text)\" is in group \(group), which is not on disk: fetch it first (assetpatch_group_fetch)")
        }
        guard ResourceName.isValid(name) else { return AssetPatchError(.argument, "invalid resource name \"\(text)\"") }
        if found == .range { return AssetPatchError(.range, "path of \(length) bytes for \"\(text)\" does not fit in \(capacity)") }
        return AssetPatchError(.notFound, "no resource \"\(text)\" in the active release or the bundle")
    }
}
