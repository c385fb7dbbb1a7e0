import Glibc

/// A file of an installed release that a new one may take: its release's directory for its
/// group (one String for all of them) and its path there, both shared with what the store
/// read, so that 100,000 of them cost no path of their own.
struct InstalledFile: Equatable {
    /// Root `<release>/files/` or `<release>/groups/<name>/`.
    let place: FilePlace
    let size: UInt64

    init(root: String, path: String, size: UInt64) {
        place = FilePlace(root: root, path: path)
        self.size = size
    }
}

/// The files of the installed releases a new release's files may be taken from, found by the
/// new file. Most are the new release's own files at the same path with the same content
/// (`sharing`, the new release's list): for those, a root number per new file is all that is
/// kept (2 bytes). The others are by digest, the first given for a digest kept: the files in
/// the order given, and their digests sorted beside their places (plain words, so sorting moves
/// no String), searched by halves. At 100,000 files a dictionary's buckets were 19 MB (its
/// capacity a power of two past 4/3 of the count), a table of every installed file 8 MB; an
/// update that changes one file holds 200 KB.
struct InstalledFiles {
    /// The new release's files, in path order, and for each the number (from 1) in `roots` of
    /// the directory holding an installed file at its path with its content; 0: none.
    private let sharing: [ManifestFile]
    private var same: [UInt16]
    private var roots: [String] = []
    private var files: [InstalledFile] = []
    private var order: [(digest: Sha256, file: UInt32)] = []
    /// `order[..<sealed]` is sorted and searched; what was appended after it is not yet.
    private var sealed = 0
    /// The groups of the last files appended, which wait for their roots (`appendPending`).
    private var pendingGroups: [UInt16] = []
    /// New files found at their path in the record being read, with the group holding them:
    /// `placePending` gives them their roots.
    private var pendingSame: [(file: UInt32, group: UInt16)] = []

    /// `sharing`: the new release's files. Only files in strictly increasing path order (an
    /// index's; a format-1 manifest's need not be) are searched by path: otherwise, and with
    /// none, every file goes by digest.
    init(sharing: [ManifestFile] = []) {
        let ordered = sharing.indices.dropFirst().allSatisfy { InstalledFiles.compare(sharing[$0 - 1].path, sharing[$0].path) < 0 }
        self.sharing = ordered ? sharing : []
        same = Array(repeating: 0, count: self.sharing.count)
    }

    /// The files found by digest (the others are counted by the new release's files).
    var count: Int { order.count }

    /// The new release's files an installed file of the same path and content was found for.
    var foundInPlace: Int { same.reduce(0) { $1 == 0 ? $0 : $0 + 1 } }

    /// Adds `file` as content `digest`, unless a sealed digest is the same (`seal` drops the
    /// later of equal digests appended since): a release kept for rollback shares most of
    /// the active one's files and adds no entry for them.
    @discardableResult
    mutating func append(_ digest: Sha256, _ file: InstalledFile) -> Bool {
        guard self[digest] == nil else { return false }
        order.append((digest, UInt32(files.count)))
        files.append(file)
        return true
    }

    /// Adds `file` of group number `group`, its root not yet known (the record names its groups
    /// after its files): `placePending` gives it, before `seal`. `sharingIndex`: the new file at
    /// the same path (the file's path is then that file's String); where its content and size
    /// are the file's too, the new file is found in place, and nothing is added by digest.
    mutating func appendPending(_ digest: Sha256, _ file: InstalledFile, group: UInt16, sharingIndex: Int? = nil) {
        if let i = sharingIndex, i < sharing.count, sharing[i].digest == digest, sharing[i].size == file.size {
            if same[i] == 0 { pendingSame.append((UInt32(i), group)) }
            return
        }
        if append(digest, file) { pendingGroups.append(group) }
    }

    /// Gives each file appended pending its root, `root(its group)`, or drops it where that is
    /// nil (a group not on disk, a record that turned out bad).
    mutating func placePending(_ root: (UInt16) -> String?) {
        let first = files.count - pendingGroups.count
        var kept = first
        for i in first..<files.count {
            guard let r = root(pendingGroups[i - first]) else { continue }
            files[kept] = InstalledFile(root: r, path: files[i].place.path, size: files[i].size)
            order[sealed + kept - first] = (order[sealed + i - first].digest, UInt32(kept))
            kept += 1
        }
        files.removeLast(files.count - kept)
        order.removeLast(order.count - (sealed + kept - first))
        pendingGroups = []
        // The record's roots, numbered once each (a release has one per group).
        var numbered: [UInt16: UInt16] = [:]
        for (i, group) in pendingSame {
            if let n = numbered[group] {
                same[Int(i)] = n
                continue
            }
            guard let r = root(group) else { continue }
            guard roots.count < Int(UInt16.max) - 1 else {
                // More roots than a number holds (only a damaged record has them): by digest.
                let f = sharing[Int(i)]
                append(f.digest, InstalledFile(root: r, path: f.path, size: f.size))
                continue
            }
            roots.append(r)
            numbered[group] = UInt16(roots.count)
            same[Int(i)] = UInt16(roots.count)
        }
        pendingSame = []
    }

    /// Orders the digests appended for lookups; of equal digests, the first appended stays.
    mutating func seal() {
        guard sealed < order.count else { return }
        // Stable: of equal digests the first appended comes first, and the rest go.
        order.sort { $0.digest < $1.digest }
        var kept = 0
        for i in order.indices where kept == 0 || order[i].digest != order[kept - 1].digest {
            order[kept] = order[i]
            kept += 1
        }
        order.removeLast(order.count - kept)
        sealed = order.count
    }

    /// Once every record is read: a new file not found in place whose content another new
    /// file's place holds (a file copied or renamed into the release, or there twice) is found
    /// by its digest too.
    mutating func finish() {
        seal()
        var wanted = sharing.indices.compactMap { i in same[i] == 0 && self[sharing[i]] == nil ? sharing[i].digest : nil }
        guard !wanted.isEmpty else { return }
        wanted.sort(by: <)
        func isWanted(_ digest: Sha256) -> Bool {
            let at = wanted.lowerBound { $0 < digest }
            return at < wanted.count && wanted[at] == digest
        }
        for (i, f) in sharing.enumerated() where same[i] != 0 && isWanted(f.digest) {
            append(f.digest, InstalledFile(root: roots[Int(same[i]) - 1], path: f.path, size: f.size))
        }
        seal()
    }

    /// Where the content of `f` is installed: at its own path, else anywhere by digest.
    subscript(_ f: ManifestFile) -> InstalledFile? {
        if let i = sharingIndex(of: f.path), same[i] != 0, sharing[i].digest == f.digest, sharing[i].size == f.size {
            return InstalledFile(root: roots[Int(same[i]) - 1], path: sharing[i].path, size: f.size)
        }
        return self[f.digest].flatMap { $0.size == f.size ? $0 : nil }
    }

    /// The file of content `digest` among those found by digest and sealed.
    subscript(_ digest: Sha256) -> InstalledFile? {
        let at = order[..<sealed].lowerBound { $0.digest < digest }
        return at < sealed && order[at].digest == digest ? files[Int(order[at].file)] : nil
    }

    /// The number of the new file at `path`.
    private func sharingIndex(of path: String) -> Int? { InstalledFiles.number(of: path, in: sharing) }

    /// The number of the file at `path` in `files`, a list in path order (a search by halves,
    /// comparing bytes); nil when it is not there.
    static func number(of path: String, in files: [ManifestFile]) -> Int? {
        let at = files.lowerBound { InstalledFiles.compare($0.path, path) < 0 }
        return at < files.count && InstalledFiles.compare(files[at].path, path) == 0 ? at : nil
    }

    /// A walk along a list in path order, fed paths in increasing order: each is found by
    /// moving forward, not searched for (a record merged with the new release's files).
    struct Cursor {
        let files: [ManifestFile]
        private var next = 0  // the first of `files` not before the last path found

        init(_ files: [ManifestFile]) { self.files = files }

        /// The number of the file at `path` in `files`, nil when it is not there.
        mutating func find(_ path: String) -> Int? {
            while next < files.count, InstalledFiles.compare(files[next].path, path) < 0 { next += 1 }
            return next < files.count && InstalledFiles.compare(files[next].path, path) == 0 ? next : nil
        }
    }

    /// Byte order of two paths (`memcmp`, then the shorter first).
    @inline(__always)
    static func compare(_ a: String, _ b: String) -> Int {
        var a = a, b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                let n = min(x.count, y.count)
                let c = n == 0 ? 0 : memcmp(x.baseAddress!, y.baseAddress!, n)
                return c != 0 ? Int(c) : x.count - y.count
            }
        }
    }

    static let empty = InstalledFiles()
}
