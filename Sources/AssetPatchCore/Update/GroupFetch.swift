import Glibc

/// One on-demand group of an installed release, to fetch from that release's own archive.
struct GroupFetchTarget {
    var releaseID: String
    var record: ReleaseRecord
    var group: ReleaseGroup
    /// Its number in the release's group table.
    var number: UInt16
}

extension Updater {
    /// The candidate a group fetch reads: the installed release's own archive and index, as
    /// its record keeps them (from the signed head it was installed from), never a newer one.
    func candidate(installed id: String, _ record: ReleaseRecord) throws -> Candidate {
        guard let url = record.archiveURL, let size = record.archiveSize, let index = record.index, let archive = Location(url) else {
            throw AssetPatchError(.state, "version \(record.version) was installed without its archive's location (from a format-1 manifest, or before groups): its groups come with the next update")
        }
        var m = Manifest(kind: .format2, package: nil, version: record.version, label: record.label, created: record.created,
                         expires: nil, minAppVersion: nil, archiveURL: url, archiveSize: size, archiveDigest: record.archiveDigest,
                         files: [], plugins: record.plugins, signatureVerified: record.signatureVerified, payload: [])
        m.index = index
        return Candidate(manifest: m, archive: archive, version: record.version, releaseID: id)
    }

    /// Fetches group `t` into `releases/<id>/groups/<name>/`: its files and chunks found on disk
    /// (installed releases, earlier attempts, the bundle) are linked or copied, the rest fetched
    /// by range from the release's archive into `downloads/groups/<id>@<name>/` (kept across
    /// attempts: a killed fetch resumes), each checked against its sha256 as it arrives; the
    /// group's directory is built beside them, made durable file by file and directory by
    /// directory, then renamed into the release in one step. `leased` gets the lease on the
    /// group's directory, taken before the rename (a clean-up never deletes it from under the
    /// fetch). The caller holds the group's fetch lock and then lists the group in the state.
    /// Returns the bytes transferred.
    func fetchGroup(_ t: GroupFetchTarget, _ state: StoreState, leased: (ReleaseLease) -> Void) throws -> UInt64 {
        var c = try candidate(installed: t.releaseID, t.record)
        // The group's chunk lists too, fetched now (the update did not): a killed fetch of a
        // large file resumes chunk by chunk, and chunks on disk are reused.
        try walkIndex(&c, from: c.archive, groups: t.record.groupTable) { table, _ in { table.fileGroups[$0] == t.number } }
        let files = c.allFiles.filter { $0.group == t.number }
        let download = store.groupDownload(t.releaseID, t.group.name)
        let stage = download + "/stage"
        try FS.makeDirectories(download + "/files")
        groupDownload = download
        var state = state
        var moved: UInt64 = 0
        var durable: [Bool] = []
        var synced = Set<FileIdentity>()
        for attempt in 0..<2 {
            do {
                let (bytes, linked, behind) = try fetchAndPlace(c, t, files, state, download: download, stage: stage)
                (moved, durable, synced) = (moved + bytes, linked, behind)
                break
            } catch let f as DifferentialFallback where attempt == 0 {
                // A file on disk it linked from changed or went (an update's clean-up, an
                // eviction): planned again from what is on disk now.
                // What this fetch kept is dropped too: a chunk a power cut damaged under its
                // final name would fail again.
                log(.warning, "group \(t.group.name): \(f.message); planning again")
                state = try store.loadState()
                installedCache = nil
                try FS.removeTree(download)
                try FS.makeDirectories(download + "/files")
                verifiedFetched = []
                verifiedInDir = [:]
            } catch let f as DifferentialFallback {
                throw AssetPatchError(.io, "group \(t.group.name): \(f.message)")
            }
        }
        var paths: [String] = [], dirs = Set<String>()
        for (i, f) in files.enumerated() {
            if i >= durable.count || !durable[i], !synced.holds(stage + "/" + f.path) { paths.append(stage + "/" + f.path) }
            var p = f.path
            while let parent = p.beforeLastSlash, dirs.insert(parent).inserted { p = parent }
        }
        try FS.syncFiles(paths, directories: dirs.sorted { $0.utf8.count > $1.utf8.count }.map { stage + "/" + $0 } + [stage])

        // `groups/` durable in the release whichever attempt made it.
        let groupsDir = store.groupsDir(t.releaseID)
        try FS.makeDirectories(groupsDir)
        try FS.syncDirectory(store.releaseDir(t.releaseID))
        guard let lease = try store.lease(t.releaseID + "@" + t.group.name, at: store.groupLeasePath(t.releaseID, t.group.name),
                                          whileDirectory: stage) else {
            throw AssetPatchError(.io, "\(stage): gone while the group was built")
        }
        let target = store.groupDir(t.releaseID, t.group.name)
        // A directory already there is complete (it is only ever renamed in whole): another
        // process's fetch, or one evicted while a client served it. It is kept as it is.
        if !FS.exists(target) {
            try FS.rename(stage, target)
            try FS.syncDirectory(groupsDir)
        }
        leased(lease)
        return moved
    }

    /// Fetches what `files` need by range into `download` (kept across attempts), then builds
    /// them in `stage`; returns the bytes transferred, which of `files` are durable already, and
    /// the files made durable as they were kept (`SyncBehind`, by identity). A local file that
    /// fails throws `DifferentialFallback` (the caller plans again, once).
    private func fetchAndPlace(_ c: Candidate, _ t: GroupFetchTarget, _ files: [ManifestFile], _ state: StoreState,
                               download: String, stage: String) throws -> (UInt64, [Bool], Set<FileIdentity>) {
        guard let plan = try plan(files, chunkLists: c.index?.chunks ?? [:], linked: c.index?.linked ?? [], chunkSize: c.manifest.index?.chunkSize ?? 0, state,
                                  fetchedChunks: store.chunks(in: download + "/chunks")) else {
            throw AssetPatchError(.manifest, "\(c.archive.shown): the index lists a file of group \(t.group.name) without its location")
        }
        if !c.archive.isFile { try allowMetered(plan.fetchBytes, "group \(t.group.name)") }
        try store.requireFreeSpace(plan.files.reduce(plan.chunked.reduce(0) { $0 + $1.file.size }) { $0 + $1.file.size }, for: "group \(t.group.name)")
        log(.info, "fetching group \(t.group.name) of version \(t.record.version): \(plan.fetchEntries) files and chunks in \(plan.ranges.count + plan.chunkRanges.count) ranges, \(plan.fetchBytes) bytes")
        progress.report(Progress(phase: .download, bytesDone: 0, bytesTotal: plan.fetchBytes, filesDone: 0, filesTotal: UInt64(plan.fetchEntries)))
        // The files are made durable as they are kept, behind the fetch and the rebuilds.
        let syncBehind = SyncBehind()
        let fetch = RangeFetch(source: c.archive, archiveSize: c.manifest.archiveSize ?? 0, dir: download + "/files", http: http,
                               parallel: config.parallelDownloads, cancel: cancel, progress: progress, sources: context.sources,
                               syncBehind: syncBehind)
        let chunks: [String: String]
        // What stopped a rebuild is thrown where `place` would have rebuilt the file.
        let rebuildFailure: Error?
        do {
            let arriving = Arrivals(store.chunks(in: download + "/chunks"))
            rebuildFailure = try fetchRebuildingAhead(c, plan, fetch, chunks: arriving, chunkDir: download + "/chunks", into: download + "/files",
                                                      syncBehind: syncBehind)
            chunks = arriving.all
        } catch let f as DifferentialFallback {
            _ = try syncBehind.finish()  // a file that failed to sync is the disk's error
            if f.badBytes { throw AssetPatchError(.integrity, "group \(t.group.name): \(f.message)") }
            throw AssetPatchError(.http, "\(f.message): groups are fetched by range, which this host does not answer as asked")
        }
        progress.report(Progress(phase: .download, bytesDone: plan.fetchBytes, bytesTotal: plan.fetchBytes,
                                 filesDone: UInt64(plan.fetchEntries), filesTotal: UInt64(plan.fetchEntries)), final: true)
        for path in fetch.fetched.values { verifiedFetched.insert(path) }
        try cancel.check()
        // The group's directory, built beside the downloads and made durable before it is named.
        try FS.removeTree(stage)
        try FS.makeDirectories(stage)
        do {
            if let rebuildFailure { throw rebuildFailure }
            let durable = try Installer(store: store, maxReleaseBytes: config.maxReleaseBytes, cancel: cancel, progress: progress, syncBehind: syncBehind)
                .place(plan, fetched: { [fetched = fetch.fetched] in fetched[$0.sha256] }, chunks: chunks, rebuiltDir: download + "/files") { [root = stage + "/"] in TreeLinks.Place(root: root, path: $0.path) }
            return (plan.fetchBytes, durable, try syncBehind.finish())
        } catch let f as DifferentialFallback {
            _ = try syncBehind.finish()  // a file that failed to sync is the disk's error
            // A linked chunk that did not decode when its file was rebuilt: the server's bytes.
            if f.badBytes { throw AssetPatchError(.integrity, "group \(t.group.name): \(f.message)") }
            throw f
        }
    }
}
