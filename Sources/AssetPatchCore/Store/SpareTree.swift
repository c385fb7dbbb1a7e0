import Glibc

/// A release's tree of files kept for the next update to build on, so that an update at
/// 100,000 files does not make 100,000 links and, once active, delete the 100,000 of the
/// release leaving.
///
/// When a release is activated and an earlier one leaves the store (beyond `keep_versions`),
/// the leaving one's directory is not deleted but made into a copy of the new release's
/// `files/` (`TreeMirror`: what is not the new release's own file is unlinked, what is missing
/// is hard-linked from the new release), and the new release's record is linked beside it
/// (`spare/<id>`: the tree is exactly the `files/` of release `<id>`, as that record lists
/// them). The next update moves it into its staging directory and changes only what its release
/// changes (`reconcile`). Both cost what changed between the releases, not the catalog; files
/// under `files/` are never written in place (they are links other releases share), only
/// unlinked and linked.
///
/// Nothing reads a spare but an update, under the update lock. It is made complete in
/// `spare.new` (every directory it changed made durable) before its rename to `spare/<id>`,
/// and taken (or dropped) with a durable rename before it is changed, so a power cut never
/// leaves a `spare/<id>` that differs from its record. A file it keeps from the leaving release
/// is the new release's own file (the same inode), so a file damaged, replaced or removed in a
/// kept release is linked from the new release instead; the spare itself, which only this
/// code writes, is trusted when it is taken. A spare holds no bytes of its own while its release is on disk
/// (its files are that release's); `usage` counts it with the releases, and a reset or a full
/// disk drops it.
struct SpareTree {
    /// The files a tree holds in place for a release, and the directories it changed.
    struct Reconciled {
        /// By number in the release's file list: the file is in the tree at its place.
        var present: [Bool]
        /// Directories (relative to the tree, empty: the tree itself) whose entries changed,
        /// as bytes: names equal as Unicode but not as bytes are other directories on disk.
        var touched: Set<[UInt8]>

        /// The directories changed, deepest first, under `dir`.
        func touchedPaths(under dir: String) -> [String] { SpareTree.paths(touched, under: dir) }
    }

    /// Directories given as bytes relative to `dir` (empty: `dir` itself), as paths, deepest first.
    static func paths(_ directories: Set<[UInt8]>, under dir: String) -> [String] {
        directories.sorted { $0.count > $1.count }.map { $0.isEmpty ? dir : dir + "/" + String(decoding: $0, as: UTF8.self) }
    }

    /// The directory a relative path is in, as bytes (empty: the top).
    static func parent<C: BidirectionalCollection>(_ path: C) -> [UInt8] where C.Element == UInt8 {
        Array(path[..<(path.lastIndex(of: UInt8(ascii: "/")) ?? path.startIndex)])
    }

    /// The record a spare tree lists its files by.
    static let recordName = Store.recordName

    /// A spare's record read against a release's files (in path order): each of its files at a
    /// new file's path with its content (by number, with the base's group, known once its
    /// groups are read, after its files), and the others (what changed, few).
    struct Matcher {
        let files: [ManifestFile]
        /// By number in `files`: the record has the file at its path with its content. A flag
        /// each (100 KB at 100,000 files: this is held from the plan to the install).
        var matched: [Bool]
        /// The record's groups of matched files outside the base (group 0), by number, in order.
        var matchedGroups: [(file: UInt32, group: UInt16)] = []
        var stale: [(path: String, group: UInt16)] = []
        var outOfOrder = false
        private var cursor: InstalledFiles.Cursor
        private var last: String?

        init(_ files: [ManifestFile]) {
            self.files = files
            cursor = InstalledFiles.Cursor(files)
            matched = [Bool](repeating: false, count: files.count)
        }

        mutating func take(_ f: ManifestFile) { take(f, at: cursor.find(f.path)) }

        /// `at`: the number of the file at `f`'s path in `files`, found by the caller's walk
        /// along the same list (`InstalledFiles.Cursor`).
        mutating func take(_ f: ManifestFile, at: Int?) {
            if let last, InstalledFiles.compare(last, f.path) >= 0 { outOfOrder = true }
            last = f.path
            if let at, !matched[at], files[at].digest == f.digest, files[at].size == f.size {
                matched[at] = true
                if f.group != 0 { matchedGroups.append((UInt32(at), f.group)) }
            } else {
                stale.append((f.path, f.group))
            }
        }

        /// Each matched file in order (its number), with the record's group.
        func forEachMatch(_ body: (Int, UInt16) throws -> Void) rethrows {
            var g = 0
            for i in matched.indices where matched[i] {
                while g < matchedGroups.count, Int(matchedGroups[g].file) < i { g += 1 }
                try body(i, g < matchedGroups.count && Int(matchedGroups[g].file) == i ? matchedGroups[g].group : 0)
            }
        }
    }

    /// A record read already, matched against a release's files: in the steady state the
    /// spare's record is a hard link to the active release's, which the update reads for its
    /// plan (`Store.installedFiles`); taking the spare then reads it again only when it is not
    /// that file (`identity`: device, inode, size and time) or the files are not the same list.
    struct Base {
        let id: String
        let identity: FileIdentity
        let record: ReleaseRecord
        let matcher: Matcher

        /// Whether this is the reading of `dir`'s record against `files`.
        func serves(_ dir: String, files: [ManifestFile]) -> Bool {
            guard let other = FileIdentity(path: dir + "/" + SpareTree.recordName), other == identity else { return false }
            let mine = matcher.files
            guard mine.count == files.count else { return false }
            let shared = mine.withUnsafeBufferPointer { a in files.withUnsafeBufferPointer { b in a.baseAddress == b.baseAddress } }
            return shared || mine.indices.allSatisfy { i in
                mine[i].path == files[i].path && mine[i].digest == files[i].digest && mine[i].size == files[i].size && mine[i].group == files[i].group
            }
        }
    }

    /// Makes the spare tree at `dir` (its `files/` exactly what the record `dir/release.json`
    /// lists there) hold under `files/` only the files of `files` (`info`'s, or a list of the
    /// same release in path order) that are there with the same content and size, and nothing
    /// beside `files/`. Throws when the lists are not both in strictly increasing path order or
    /// the record can't be read: the caller then builds without the tree. `read`: that record
    /// read against `files` already, when it `serves` (else it is read here).
    static func reconcile(_ dir: String, toward info: ReleaseRecord, files: [ManifestFile], read: Base? = nil,
                          cancel: CancelToken) throws -> Reconciled {
        let ordered = files.indices.dropFirst().allSatisfy { InstalledFiles.compare(files[$0 - 1].path, files[$0].path) < 0 }
        guard ordered else { throw AssetPatchError(.state, "\(dir): the release's files are not in path order") }
        let base: ReleaseRecord, matcher: Matcher
        if let read, read.serves(dir, files: files) {
            (base, matcher) = (read.record, read.matcher)
        } else {
            var m = Matcher(files)
            base = try Store.loadRecord(dir + "/" + recordName, listingFiles: false) { m.take($0) }
            matcher = m
        }
        var stale = matcher.stale
        guard !matcher.outOfOrder else { throw AssetPatchError(.state, "\(dir): its record's files are not in path order") }
        try cancel.check()
        func underFiles(_ r: ReleaseRecord, _ group: UInt16) -> Bool {
            group == 0 || (Int(group) <= r.groups.count && r.groups[Int(group) - 1].delivery != .onDemand)
        }
        var result = Reconciled(present: [Bool](repeating: false, count: files.count), touched: [[]])
        matcher.forEachMatch { n, group in
            guard underFiles(base, group) else { return }
            let f = files[n]
            if underFiles(info, f.group) {
                result.present[n] = true
            } else {
                stale.append((f.path, group))
            }
        }
        // Everything beside files/ goes (the base's record, names, groups on disk).
        for name in try FS.list(dir) where name != "files" { try FS.removeTree(dir + "/" + name) }
        var emptied = Set<[UInt8]>()
        for s in stale where underFiles(base, s.group) {
            try cancel.check()
            let rel = "files/" + s.path
            try FS.unlink(dir + "/" + rel)
            let parent = SpareTree.parent(rel.utf8)
            result.touched.insert(parent)
            emptied.insert(parent)
        }
        // Directories left empty go, deepest first; a parent of one removed is tried in the
        // next round. Each is synced before it goes: its unlinks are then durable before its
        // removal is (a file system that orders each directory on its own could otherwise keep
        // the directory, and the file in it, past a power cut while a new one of the same name
        // was made).
        let files = Array("files".utf8)
        while !emptied.isEmpty {
            var parents = Set<[UInt8]>()
            for d in emptied.sorted(by: { $0.count > $1.count }) where d.count > files.count + 1 && d.starts(with: files + [UInt8(ascii: "/")]) {
                let path = dir + "/" + String(decoding: d, as: UTF8.self)
                guard (try? FS.list(path))?.isEmpty == true else { continue }
                try FS.syncDirectory(path)
                guard rmdir(path) == 0 else { continue }
                let parent = SpareTree.parent(d)
                result.touched.remove(d)
                result.touched.insert(parent)
                parents.insert(parent)
            }
            emptied = parents
        }
        return result
    }
}

extension Store {
    /// Where the spare tree lies (`spare/<id>`), where one is made, and where one goes to be
    /// removed.
    var spareRoot: String { root + "/spare" }
    var spareBuildingDir: String { root + "/spare.new" }
    var spareRemovedDir: String { root + "/spare.old" }

    /// The release the spare tree copies, if there is one.
    func spareBase() -> String? {
        ((try? FS.list(spareRoot)) ?? []).first(where: Store.isReleaseID)
    }

    /// Moves the spare tree into the (empty) staging directory of release `id` and makes it
    /// hold in place what `files` (the release's, `info`'s or its plan's list) share with it;
    /// nil when there is no spare, or it can't serve (the staging directory is then empty
    /// again). The move is durable before the tree changes: a spare is never seen changed.
    /// `read`: the spare's record read already (`installedFiles(_:sharing:spareRead:)`).
    func takeSpare(into id: String, _ info: ReleaseRecord, files: [ManifestFile], read: SpareTree.Base? = nil, cancel: CancelToken,
                   log: (LogLevel, String) -> Void) throws -> SpareTree.Reconciled? {
        guard let base = spareBase() else { return nil }
        let stage = stagingDir(id)
        try FS.removeTree(stage)
        do {
            // Durable on both sides before anything in it changes: never seen changed where
            // it was, nor lost where it went.
            try FS.rename(spareRoot + "/" + base, stage)
            try FS.syncDirectory(stagingRoot)
            try FS.syncDirectory(spareRoot)
            var r = try SpareTree.reconcile(stage, toward: info, files: files, read: read?.id == base ? read : nil, cancel: cancel)
            try FS.makeDirectories(stagingFilesDir(id))
            r.touched.insert(Array("files".utf8))
            return r
        } catch let e as AssetPatchError {
            log(.info, "the spare tree of release \(base) can't serve release \(id): \(e.message)")
            // A tree half changed is never built on: the staging directory starts empty.
            try prepareStaging(id)
            return nil
        }
    }

    /// Removes the spare tree: renamed away first (durably), so that what is left of it after a
    /// crash is never taken.
    func dropSpare() throws {
        try FS.removeTree(spareRemovedDir)
        for name in (try? FS.list(spareRoot)) ?? [] {
            try FS.rename(spareRoot + "/" + name, spareRemovedDir)
            try FS.syncDirectory(spareRoot)
            try FS.removeTree(spareRemovedDir)
        }
    }

    /// Makes the tree of a release leaving the store (`leaving`: ids this activation took out
    /// of the state) the spare: a copy of release `id`'s `files/`, which the state names now.
    /// A leaving release a client still serves stays for the clean-up, and without one leaving
    /// nothing is done. Failing costs only the spare (the clean-up removes what is left); never
    /// throws.
    func makeSpare(toward id: String, _ info: ReleaseRecord, leaving: [String], cancel: CancelToken, log: (LogLevel, String) -> Void) {
        guard !leaving.isEmpty, spareBase() != id else { return }
        // The newest leaving release is the likeliest to share most with the new one.
        let byVersion = leaving.filter(Store.isReleaseID).sorted { (Int64($0.prefix { $0 != "-" }) ?? 0) > (Int64($1.prefix { $0 != "-" }) ?? 0) }
        let building = spareBuildingDir
        do {
            try FS.removeTree(building)
            var taken = false
            for l in byVersion where !taken && FS.exists(releaseDir(l)) {
                taken = try withExclusiveLease(l) { try FS.rename(releaseDir(l), building) }
            }
            guard taken else { return }
            try FS.syncDirectory(root)
            var st = stat()
            guard lstat(building, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { throw AssetPatchError(.state, "\(building): not a directory") }
            // Everything beside files/ goes (the leaving record, names, groups on disk); the new
            // release's files/ is mirrored by its own inodes (durable when it returns).
            for name in try FS.list(building) where name != "files" { try FS.removeTree(building + "/" + name) }
            if !FS.isDirectory(building + "/files") {
                try FS.removeTree(building + "/files")
                try FS.makeDirectories(building + "/files")
            }
            // The new release's tree must be what its record lists: each file linked is a listed
            // file, sealed at its size (as a link source must be), and the count is the list's
            // (a file missing from the release or one added to it is never carried on).
            let files = info.files
            let listed = files.reduce(0) { $0 + (info.onDemandGroup(of: $1) == nil ? 1 : 0) }
            let changes = try TreeMirror.mirror(source: filesDir(id), target: building + "/files", cancel: cancel) { path, dir, name in
                guard let k = InstalledFiles.number(of: path, in: files), info.onDemandGroup(of: files[k]) == nil else { return false }
                var st = stat()
                return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && TreeLinks.isSealed(st, size: files[k].size)
            }
            guard changes.sourceFiles == listed else {
                throw AssetPatchError(.state, "release \(id) holds \(changes.sourceFiles) files under files/, its record lists \(listed)")
            }
            log(.debug, "spare tree for release \(id): \(changes.linked) files linked, \(changes.removed) removed, "
                + "\(changes.directoriesMade) directories made")
            if Glibc.link(releaseRecordPath(id), building + "/" + SpareTree.recordName) != 0 { throw ioError("link", releaseRecordPath(id)) }
            try FS.syncDirectory(building)
            try dropSpare()
            try FS.makeDirectories(spareRoot)
            try FS.rename(building, spareRoot + "/" + id)
            try FS.syncDirectory(spareRoot)
        } catch {
            log(.info, "no spare tree for the next update: \(error)")
            try? FS.removeTree(building)
        }
    }
}
