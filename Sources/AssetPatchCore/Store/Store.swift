import Glibc

/// The data directory. Its paths are built by `Store` and its extensions, in this folder:
///
///     state.json                       the state: which release is active, kept, pending (atomic rename)
///     lock                             flock(2) target serialising updates across processes
///     state.lock                       flock(2) target held while the state is read, changed and written
///     releases/<id>/files/...          an installed release's resources (read-only files)
///     releases/<id>/release.json       what the release holds (files, hashes, plugins)
///     releases/<id>/names              its file names, NUL-separated: what an open indexes
///     releases/<id>/group-table        its groups and each file's (`GroupTable`), when it has groups
///     releases/<id>/groups/<name>/...  an on-demand group's files, once fetched (`GroupsOnDisk`)
///     staging/<id>/                    a release being installed; removed at open, never active
///     spare/<id>/files/...             a copy of release <id>'s files/ that the next update builds on
///     spare/<id>/release.json          ... linked to that release's record (`SpareTree`)
///     spare.new/, spare.old/           a spare being made, and one being removed; removed at open
///     downloads/<digest>.part          a partial archive, kept across restarts for resuming
///     downloads/<digest>.meta          what the partial was fetched from (URL, validator, coding)
///     downloads/<digest>.files/<sha>   files a differential attempt fetched, kept for the next
///     downloads/<digest>.files/.<sha>.rebuild  a chunked file being rebuilt, its fetched chunks in place
///     downloads/<digest>.chunks/<sha>  chunks fetched for a chunked file that none holds in place
///     leases/<id>                      flock(2) targets: the release each client serves
///     leases/<id>@<group>              ... and the on-demand groups it serves
///     downloads/groups/<id>@<group>/   what a group fetch keeps across attempts, and its lock
///     index/<sha256>                   index pages of format-2 releases on disk (PageStore)
///     manifest-cache                   manifests kept with their validators for a 304
///     bundle-digests, chunk-scans/     caches of the bundle's digests and of chunk cuts
///     key-documents/<anchor>.json      the newest key document followed from each trust anchor
///     rollout-id                       this data directory's id in staged rollouts (0600)
///     mirrors                          the mirrors the newest verified head listed (KeptMirrors)
///     named-head                       the head a manifest.json names, read in its place (NamedHead)
///
/// `<id>` is `<version>-<first 16 hex digits of the archive digest>`. Everything the library
/// writes lives here.
package final class Store: @unchecked Sendable {  // immutable paths only; state goes through load/save
    package let root: String
    package var statePath: String { root + "/state.json" }
    var lockPath: String { root + "/lock" }
    var stateLockPath: String { root + "/state.lock" }
    /// Held shared by foreground transfers; background ones hold while they can't lock it.
    package var transfersLockPath: String { root + "/transfers.lock" }
    package var releasesDir: String { root + "/releases" }
    package var stagingRoot: String { root + "/staging" }
    package var downloadsDir: String { root + "/downloads" }

    package init(root: String) throws {
        self.root = FS.absolute(root)
        try FS.makeDirectories(self.root, mode: 0o755)
        try Store.requireTrusted(self.root, "data directory", followLink: true)
        for d in [releasesDir, stagingRoot, downloadsDir, leasesDir, spareRoot] {
            try FS.makeDirectories(d)
            try Store.requireTrusted(d, "data directory's", followLink: false)
        }
    }

    static func isReleaseID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64 && id.utf8.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 122) || $0 == UInt8(ascii: "-") }
    }

    package static func releaseID(version: Int64, digest: String) -> String {
        "\(version)-\(digest.prefix(16))"
    }

    // MARK: Paths

    package func releaseDir(_ id: String) -> String { releasesDir + "/" + id }
    package func filesDir(_ id: String) -> String { releaseDir(id) + "/files" }
    func releaseRecordPath(_ id: String) -> String { releaseDir(id) + "/" + Store.recordName }
    func namesPath(_ id: String) -> String { releaseDir(id) + "/" + Store.namesName }
    /// A release directory's own files, the same in staging and in place.
    static let recordName = "release.json", namesName = "names", groupTableName = "group-table", bundleCopiesName = "bundle-copies",
                       groupFetchName = "group-fetch"
    /// The release's files that the bundle serves while their group is absent (`bundleCopies`).
    func bundleCopies(_ id: String) -> [(path: String, sha256: String)] {
        pairs(id, Store.bundleCopiesName, limit: 64 << 20).compactMap { sha, path in
            Hex.isHex(sha, length: 64) && ResourceName.isValid(path) ? (path, sha) : nil
        }
    }
    /// What fetching each on-demand group the update left absent would transfer, as that
    /// update planned it (`groupFetchBytes`); empty for a release installed without the file.
    func groupFetchBytes(_ id: String) -> [String: UInt64] {
        var out: [String: UInt64] = [:]
        for (bytes, name) in pairs(id, Store.groupFetchName, limit: 64 << 10) {
            if let n = UInt64(bytes), ReleaseGroup.isValidName(name) { out[name] = n }
        }
        return out
    }
    /// A release's own "value<TAB>name" lines file (nothing when it is absent or unreadable).
    private func pairs(_ id: String, _ name: String, limit: Int) -> [(String, String)] {
        guard let bytes = try? FS.readFile(releaseDir(id) + "/" + name, limit: limit, followLinks: false) else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap { line in
            let parts = line.split(separator: "\t", maxSplits: 1).map(String.init)
            return parts.count == 2 ? (parts[0], parts[1]) : nil
        }
    }
    /// The release's group table (`GroupTable`'s encoding), beside its names: what an open reads.
    func groupTablePath(_ id: String) -> String { releaseDir(id) + "/" + Store.groupTableName }
    /// An on-demand group's files, when it is on disk.
    package func groupDir(_ id: String, _ group: String) -> String { releaseDir(id) + "/groups/" + group }

    package func stagingDir(_ id: String) -> String { stagingRoot + "/" + id }
    func stagingFilesDir(_ id: String) -> String { stagingDir(id) + "/files" }

    /// Files a differential update of the archive with this digest fetched and verified, each
    /// named by its sha256; kept across attempts until an update succeeds.
    func fetchedDir(_ digest: String) -> String { downloadsDir + "/" + digest + ".files" }
    /// Chunks an update of the archive with this digest fetched and verified, each named by its
    /// sha256; kept across attempts until an update succeeds.
    func chunksDir(_ digest: String) -> String { downloadsDir + "/" + digest + ".chunks" }
    /// Where the bundle's file digests are cached (`BundleDigests`).
    var bundleDigestsPath: String { root + "/bundle-digests" }
    /// Manifests kept with their validators (`ManifestCache`).
    var manifestCachePath: String { root + "/manifest-cache" }

    /// The partial download of the archive with this digest, and its record.
    func partialPath(_ digest: String) -> String { downloadsDir + "/" + digest + ".part" }
    func partialMetaPath(_ digest: String) -> String { downloadsDir + "/" + digest + ".meta" }

    // MARK: Records

    package func loadState() throws -> StoreState {
        guard FS.exists(statePath) else { return StoreState() }
        let bytes = try FS.readFile(statePath, limit: 16 << 20, followLinks: false)
        guard let json = try? JSONParser.parse(bytes), let state = StoreState.from(json) else {
            throw AssetPatchError(.io, "\(statePath): state file is corrupt")
        }
        return state
    }

    /// Replaces the state: one atomic, durable rename (the switch of the active release).
    /// Callers go through `modifyState`.
    private func save(_ state: StoreState) throws {
        try FS.writeAtomically(statePath, Array(state.toJSON().serialized(indent: 2).utf8 + [0x0A]))
    }

    /// Reads the state, lets `body` change it and writes it back when it changed, all under the
    /// state lock (a blocking flock held for this read-modify-write only). Opens counting
    /// launches in several processes, mark_good, rollback and an update's activation therefore
    /// never overwrite each other. Returns `body`'s result and the state as written.
    @discardableResult
    package func modifyState<T>(_ body: (inout StoreState) throws -> T) throws -> (T, StoreState) {
        let file = try File.open(stateLockPath, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o644)
        if retryingEINTR({ flock(file.fd, LOCK_EX) }) != 0 { throw ioError("flock", file.path) }
        defer { flock(file.fd, LOCK_UN) }
        var state = try loadState()
        let before = state
        let result = try body(&state)
        state.good = state.good.filter(state.liveReleaseIDs.contains)
        state.groups.local = state.groups.local.filter { state.liveReleaseIDs.contains($0.key) }
        if state != before { try save(state) }
        return (result, state)
    }

    /// Release `id`'s record; without `listingFiles`, its `files` stay empty (cheaper to read
    /// at 100,000 files, for what needs the rest).
    /// With `eachFile`, the record's files are handed to it as they are read, not listed in it
    /// (see `ReleaseRecord.decode(reading:listingFiles:eachFile:)`).
    package func loadRelease(_ id: String, listingFiles: Bool = true, eachFile: ((ManifestFile) -> Void)? = nil) throws -> ReleaseRecord {
        try Store.loadRecord(releaseRecordPath(id), listingFiles: listingFiles, eachFile: eachFile)
    }

    /// The release record at `path` (`loadRelease`).
    static func loadRecord(_ path: String, listingFiles: Bool = true, eachFile: ((ManifestFile) -> Void)? = nil) throws -> ReleaseRecord {
        // Read as it is parsed: at 100,000 files the text is 12 MB, and it was the largest
        // thing an update held.
        let file = try File.open(path, O_RDONLY | O_NOFOLLOW)
        let limit = 512 << 20
        var total = 0
        let record = try ReleaseRecord.decode(reading: { buffer in
            let n = try file.read(into: buffer)
            total += n
            if total > limit { throw AssetPatchError(.io, "\(path): larger than the limit of \(limit) bytes") }
            return n
        }, listingFiles: listingFiles, eachFile: eachFile)
        guard let info = record else {
            throw AssetPatchError(.io, "\(path): release record is corrupt")
        }
        return info
    }

    /// The release's names, NUL-separated, if its names file is there and readable.
    func loadNames(_ id: String) -> [UInt8]? {
        try? FS.readFile(namesPath(id), limit: 512 << 20, followLinks: false)
    }

    /// Every file fetched by differential updates so far, by sha256 (any archive's).
    /// `group`: also what the fetch of that group keeps (`groupDownload`); an update never links
    /// from a group fetch's files, which the fetch deletes once done.
    func fetchedFiles(group: String? = nil) -> [String: String] {
        var out: [String: String] = [:]
        var dirs: [String] = []
        for name in (try? FS.list(downloadsDir)) ?? [] where name.hasSuffix(".files") { dirs.append(downloadsDir + "/" + name) }
        if let group { dirs.append(group + "/files") }
        for dir in dirs {
            for sha in (try? FS.list(dir)) ?? [] where Hex.isHex(sha, length: 64) {
                out[sha] = dir + "/" + sha
            }
        }
        return out
    }

    /// The chunks earlier attempts at the archive with this digest fetched, by sha256 hex
    /// (hashed again when used).
    func fetchedChunks(_ digest: String) -> [String: String] {
        chunks(in: chunksDir(digest))
    }

    /// The chunks kept in `dir`, by name (`ChunkPlanner.key`): sha256 hex, and a linked
    /// chunk's compressed bytes, sha256 hex and archive offset.
    func chunks(in dir: String) -> [String: String] {
        var out: [String: String] = [:]
        for name in (try? FS.list(dir)) ?? [] {
            let hex = String(name.prefix(64)), rest = name.dropFirst(64)
            guard Hex.isHex(hex, length: 64), rest.isEmpty || (rest.first == "." && UInt64(rest.dropFirst()) != nil) else { continue }
            out[name] = dir + "/" + name
        }
        return out
    }

    /// Drops every partial download and fetched file (a reset).
    /// Group fetches of the releases `keepingGroupsOf` keep what they fetched (a fetch of a
    /// release still served resumes), and a fetch running now keeps all.
    func discardDownloads(keepingGroupsOf live: Set<String> = []) {
        for name in (try? FS.list(downloadsDir)) ?? [] where name != "groups" { try? FS.removeTree(downloadsDir + "/" + name) }
        discardGroupDownloads(except: live)
    }

    /// The files of the installed releases (active, pending, kept) that `sharing`'s files (the
    /// new release's, in path order, as a release's files are) may be taken from: their
    /// records were written after every byte was verified. Each record's files are taken as it
    /// is read (never listed: a list of 100,000 was 11 MB), merged with `sharing` by path: a
    /// file at the same path with the same content costs a number, another the new release's
    /// String for its path where it names it too, not a copy.
    func installedFiles(_ state: StoreState, sharing: [ManifestFile] = []) -> InstalledFiles {
        var read = RecordsRead()
        return installedFiles(state, sharing: sharing, read: &read)
    }

    /// What reading the installed releases' records learned beside their files.
    struct RecordsRead {
        /// The record of the release the spare tree copies, read against the new files as
        /// taking the spare reads it (`SpareTree.Base`), when it is one of them.
        var spare: SpareTree.Base?
        /// Each record read, by release id, without its files (its index roots, its groups:
        /// `localChunks`, `pruneIndexPages`).
        var records: [String: ReleaseRecord] = [:]
    }

    /// As `installedFiles(_:sharing:)`, with what else the records said in `read`.
    func installedFiles(_ state: StoreState, sharing: [ManifestFile], read: inout RecordsRead) -> InstalledFiles {
        var found = InstalledFiles(sharing: sharing)
        let spare = sharing.isEmpty ? nil : spareBase()
        read = RecordsRead()
        for ref in [state.active, state.pending].compactMap({ $0 }) + state.kept {
            var cursor = InstalledFiles.Cursor(sharing)
            var matcher = ref.id == spare ? SpareTree.Matcher(sharing) : nil
            let info = try? loadRelease(ref.id) { f in
                var path = f.path
                let at = cursor.find(path)
                matcher?.take(f, at: at)
                if let at { path = sharing[at].path }
                found.appendPending(f.digest, InstalledFile(root: "", path: path, size: f.size), group: f.group, sharingIndex: at)
            }
            if let info { read.records[ref.id] = info }
            if let info, let matcher, let identity = FileIdentity(path: releaseRecordPath(ref.id)) {
                read.spare = SpareTree.Base(id: ref.id, identity: identity, record: info, matcher: matcher)
            }
            // Where the files lie follows from the groups, which the record lists after them.
            let roots = info?.roots(in: releaseDir(ref.id) + "/") ?? []
            let local = state.groups.local[ref.id] ?? []
            found.placePending { group in
                guard let info, Int(group) < roots.count, info.isPresent(group: group, local: local) else { return nil }
                return roots[Int(group)]
            }
            found.seal()
        }
        found.finish()
        return found
    }

    func discardPartial(_ digest: String) {
        try? FS.unlink(partialPath(digest))
        try? FS.unlink(partialMetaPath(digest))
    }

    // MARK: Locking and recovery

    /// Takes the update lock without waiting; nil when another update (any process) holds it.
    package func tryLock() throws -> UpdateLock? {
        let file = try File.open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o644)
        if flock(file.fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EWOULDBLOCK || errno == EAGAIN { return nil }
            throw ioError("flock", file.path)
        }
        return UpdateLock(file: file)
    }

    /// Finishes or discards what an interrupted update left: staging directories go, releases
    /// the state does not name go, partial downloads stay (they are resumed).
    package func recover(_ state: StoreState) throws {
        for name in (try? FS.list(stagingRoot)) ?? [] { try FS.removeTree(stagingRoot + "/" + name) }
        try FS.removeTree(spareBuildingDir)
        try FS.removeTree(spareRemovedDir)
        removeStaleTemporaries(in: root)
        removeStaleTemporaries(in: downloadsDir)
        removeStaleTemporaries(in: root + "/events")
        try collectGarbage(state)
        collectGroups(state)
    }

    /// Removes release directories the state does not reference, except those a client still
    /// serves (`ReleaseLease`): they go at a later clean-up. Returns the ids kept for a lease.
    @discardableResult
    package func collectGarbage(_ state: StoreState) throws -> [String] {
        let live = state.liveReleaseIDs
        var leased: [String] = []
        for name in (try? FS.list(releasesDir)) ?? [] where !live.contains(name) {
            guard Store.isReleaseID(name) else { try FS.removeTree(releasesDir + "/" + name); continue }
            if try !withExclusiveLease(name, { try FS.removeTree(releasesDir + "/" + name) }) { leased.append(name) }
        }
        // Leases of releases long gone (a client that crashed holds none).
        for name in (try? FS.list(leasesDir)) ?? [] where !live.contains(name) && !FS.exists(releaseDir(name)) {
            _ = try? withExclusiveLease(name) {}
        }
        return leased
    }

    /// Drops the index pages no release on disk reaches (those of removed releases, and those
    /// fetched for updates that were not installed), after an update installed a release: until
    /// then, pages a check or an interrupted update fetched serve the update that follows. A
    /// page whose release record can't be read is not reached: that release has no chunks to
    /// offer.
    func pruneIndexPages(keepingReleases ids: Set<String>, known: [String: [PageRef]] = [:]) {
        let pages = PageStore(self)
        guard FS.exists(pages.dir) else { return }
        var keep = Set<String>()
        for id in ids {
            for root in known[id] ?? (try? loadRelease(id, listingFiles: false))?.indexRoots ?? [] { pages.reachable(root: root, into: &keep) }
        }
        pages.prune(keeping: keep)
    }

    /// Bytes used by installed releases, by downloads (partial archives, fetched files, staging),
    /// and by the rest (state, caches). A file hard-linked into several places counts once.
    package func usage() -> (releases: UInt64, downloads: UInt64, other: UInt64) {
        var seen = Set<[UInt64]>()
        func bytes(_ dir: String, _ rels: [String]) -> UInt64 {
            var total: UInt64 = 0
            for rel in rels {
                var st = stat()
                guard lstat(dir + "/" + rel, &st) == 0 else { continue }
                if st.st_nlink > 1, !seen.insert([UInt64(st.st_dev), UInt64(st.st_ino)]).inserted { continue }
                total += UInt64(st.st_size)
            }
            return total
        }
        let releases = bytes(releasesDir, (try? FS.walkFiles(releasesDir)) ?? []) + bytes(spareRoot, (try? FS.walkFiles(spareRoot)) ?? [])
        let downloads = bytes(downloadsDir, (try? FS.walkFiles(downloadsDir)) ?? []) + bytes(stagingRoot, (try? FS.walkFiles(stagingRoot)) ?? [])
        let top = ((try? FS.list(root)) ?? []).filter { FS.isRegularFile(root + "/" + $0) }
        let pages = ((try? FS.list(PageStore(self).dir)) ?? []).map { "index/" + $0 }
        return (releases, downloads, bytes(root, top + pages))
    }

    /// Fails early, before any byte is written, when the data directory's filesystem lacks room
    /// for `bytes` more plus a margin (2% and 4 MiB: directories, records, block rounding).
    /// Unknown free space (statvfs failing) lets the writes themselves tell.
    func requireFreeSpace(_ bytes: UInt64, for what: String) throws {
        var st = statvfs()
        guard statvfs(root, &st) == 0 else { return }
        let available = UInt64(st.f_bavail) * UInt64(st.f_frsize)
        let needed = bytes + bytes / 50 + (4 << 20)
        if needed > available {
            throw AssetPatchError(.io, "\(root): not enough free space for \(what): \(needed) bytes needed (\(bytes) and a margin), \(available) available")
        }
    }
}

extension Store {
    /// What a download of unknown size (a legacy archive) leaves free: 16 MiB or 1% of the file
    /// system, whichever is more, so that the state and the app's own files can still be written.
    static let reserveBytes: UInt64 = 16 << 20
    static let reservePercent: UInt64 = 1

    /// Throws before a download of unknown size eats into the reserve. Unknown free space
    /// (statvfs failing) lets the writes themselves tell.
    func requireReserve(for what: String) throws {
        var st = statvfs()
        guard statvfs(root, &st) == 0 else { return }
        let available = UInt64(st.f_bavail) * UInt64(st.f_frsize)
        let reserve = max(Store.reserveBytes, UInt64(st.f_blocks) * UInt64(st.f_frsize) / 100 * Store.reservePercent)
        if available < reserve {
            throw AssetPatchError(.io, "\(root): stopping \(what) with \(available) bytes free, less than the reserve of \(reserve) bytes (16 MiB or 1% of the file system)",
                                  errno: ENOSPC)
        }
    }
}

/// Holds the data directory's update lock until released or deinitialised.
package final class UpdateLock {
    let file: File
    init(file: File) { self.file = file }
    deinit { flock(file.fd, LOCK_UN) }
}
