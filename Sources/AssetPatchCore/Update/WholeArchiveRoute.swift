import Glibc

/// The whole-archive route of an update, and what earlier attempts fetched and this updater
/// verified (the files a retry or a differential plan takes without hashing them again).
extension Updater {
    /// The whole-archive path: download (resumable) and extract. With per-file locations in
    /// the manifest the files are extracted while the archive arrives (`ArchiveFollower`), then
    /// whatever the workers did not keep is taken from the complete archive, the central
    /// directory is checked against the manifest, and the release is assembled from the kept
    /// files as a differential update would be. A legacy manifest, or one without locations,
    /// is extracted after the download.
    func installWholeArchive(_ c: Candidate, _ state: StoreState) throws {
        let d = try download(for: c)
        if config.metered, !c.archive.isFile {
            try allowMetered(try transferEstimate(d), known: d.expectedSize != nil || !c.manifest.isLegacy, "version \(c.version) (the whole archive)")
        }
        // The files are made durable as they are kept, behind the download and extraction.
        let syncBehind = SyncBehind()
        let installer = Installer(store: store, maxReleaseBytes: config.maxReleaseBytes, cancel: cancel, progress: progress,
                                  syncBehind: syncBehind)
        let installed = installedFiles(state)
        guard c.locatesEveryFile,
              let plan = FilePlan.make(c.manifest.files, local: FileOrigin.onDisk(installed, verifiedFetchedFiles())) else {
            let archive = try fetch(c, d)
            try cancel.check()
            return try installer.install(c, archive: archive, installed: installed)
        }
        let dir = store.fetchedDir(c.manifest.archiveDigest)
        try FS.makeDirectories(dir)
        let follower = ArchiveFollower(path: d.partPath, entries: plan.ranges.flatMap(\.entries), workers: ArchiveFollower.workerCount(),
                                       dir: dir, shown: c.archive.shown, cancel: cancel, syncBehind: syncBehind)
        let resumedFrom = d.resumableBytes()
        try follower.start(available: resumedFrom)
        d.onWritten = follower.advance
        defer { d.onWritten = nil; d.hashing = true }  // a retry may take the other route
        // The workers check every file against its own sha256 as the archive arrives: hashing
        // the archive too would be a second pass over the same bytes on the downloading thread,
        // the one that limits the update. Its digest is taken only if a file must be read from
        // the archive itself, or its directory disagrees with the manifest.
        d.hashing = false
        let archive: String
        do { archive = try fetch(c, d) } catch {
            _ = follower.finish()
            throw error
        }
        let (kept, stopped) = follower.finish()
        try cancel.check()
        if let why = stopped.first { log(.info, "extracting behind the download stopped (\(why)); finishing from the archive") }
        var verified = false
        if plan.ranges.contains(where: { $0.entries.contains { !kept.contains($0.digest) } }) {
            try verifyArchive(c, path: archive, resumedFrom: resumedFrom)
            verified = true
        }

        // The rest from the verified archive on disk: the same receivers, read with pread.
        let rest = RangeFetch(source: .file(path: archive, url: c.archive.url), archiveSize: c.manifest.archiveSize ?? 0, dir: dir, http: http,
                              parallel: 1, cancel: cancel, progress: nil, inDir: kept, syncBehind: syncBehind)
        do {
            try rest.attempt(plan)
        } catch let f as DifferentialFallback {
            // The archive matches its signed digest, so its entries disagree with the manifest:
            // extracting by the zip's own headers says how.
            log(.warning, "\(f.message); extracting by the archive's own directory")
            return try installer.install(c, archive: archive, installed: installed)
        }
        verifiedInDir[dir, default: []].formUnion(kept)
        for path in rest.fetched.values { verifiedFetched.insert(path) }
        // The central directory must describe the entries the manifest locates; if it does not,
        // the archive's digest tells damaged bytes from a manifest that disagrees with its archive.
        do {
            _ = try ZipReader(path: archive, source: c.archive.shown).fileEntries(matching: c.allFiles)
        } catch {
            if !verified { try verifyArchive(c, path: archive, resumedFrom: resumedFrom) }
            throw error
        }
        try cancel.check()
        try store.prepareStaging(c.releaseID)
        // The files move from the download's directory into the release: the complete archive
        // stays until the release is active, so a crash before that re-extracts them locally.
        return try installer.assemble(c, plan, fetched: rest.path(of:), moveFetched: true, spareRead: spareRead, log: log)
    }

    /// Whether this updater verified the fetched file at `path` (of content `sha`).
    private func verifiedHere(_ path: String, _ sha: String) -> Bool {
        if verifiedFetched.contains(path) { return true }
        guard let dir = path.beforeLastSlash, let set = verifiedInDir[dir], let digest = Sha256(hex: sha) else { return false }
        return set.contains(digest)
    }

    /// Takes back that this updater verified the fetched file at `path`, if it did.
    func forgetVerified(_ path: String) {
        verifiedFetched.remove(path)
        if let dir = path.beforeLastSlash, let digest = Sha256(hex: String(path.dropFirst(dir.count + 1))) {
            verifiedInDir[dir]?.remove(digest)
        }
    }

    /// The files earlier attempts fetched and kept (`downloads/*.files/`), by sha256: hashed
    /// again unless this updater verified them, and removed when they no longer match.
    func verifiedFetchedFiles() -> [String: String] {
        var fetched: [String: String] = [:]
        for (sha, path) in store.fetchedFiles(group: groupDownload) {
            if verifiedHere(path, sha) { fetched[sha] = path; continue }
            if (try? Digest.hexOfFile(path)) == sha {
                verifiedFetched.insert(path)
                fetched[sha] = path
            } else {
                try? FS.unlink(path)
            }
        }
        return fetched
    }
}
