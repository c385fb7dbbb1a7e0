import Glibc

/// How an update gets its files: the route (differential or the whole archive), chosen from what
/// is already on disk, and the differential route carried out.
extension Updater {
    /// How an update gets its files.
    enum Route {
        case differential(FilePlan)
        /// The whole archive, and why.
        case wholeArchive(String)
    }

    /// The differential plan for `c`, or the whole archive: for a legacy manifest or one without
    /// per-file locations, with `differential=off`, or when ranges would transfer more than
    /// `differential_max_percent` of the archive. A file's content is looked for in the
    /// installed releases, in what earlier attempts fetched (hashed again unless this updater
    /// verified it), then in the bundle (digests cached).
    func chooseRoute(_ c: Candidate, _ state: StoreState) throws -> Route {
        guard config.differential else { return .wholeArchive("differential=off") }
        guard !c.manifest.isLegacy, let archiveSize = c.manifest.archiveSize else { return .wholeArchive("a legacy manifest") }
        guard c.locatesEveryFile else { return .wholeArchive("the manifest has no per-file locations") }
        let fetchedChunks = store.fetchedChunks(c.manifest.archiveDigest)
        guard var delta = try plan(c.manifest.files, chunkLists: c.index?.chunks ?? [:], linked: c.index?.linked ?? [],
                                   chunkSize: c.manifest.index?.chunkSize ?? 0, state, wholeWhereUnshared: true,
                                   fetchedChunks: fetchedChunks) else {
            return .wholeArchive("the manifest has no per-file locations")
        }
        delta = try withDeltas(delta, c, state) { takes in
            try plan(c.manifest.files, chunkLists: c.index?.chunks ?? [:], linked: c.index?.linked ?? [],
                     chunkSize: c.manifest.index?.chunkSize ?? 0, state, wholeWhereUnshared: true, fetchedChunks: fetchedChunks, byDelta: takes)
        }
        delta.leaveOutInPlace(dir: store.fetchedDir(c.manifest.archiveDigest))
        guard delta.paysOff(archiveSize: archiveSize, maxPercent: config.differentialMaxPercent) else {
            return .wholeArchive("ranges would transfer \(delta.fetchBytes) of the archive's \(archiveSize) bytes (more than \(config.differentialMaxPercent)%)")
        }
        // An interrupted whole-archive download resumes byte-exactly; its files extracted so
        // far are kept either way, so ranges win only if they transfer less than the rest.
        let partial = try download(for: c).resumableBytes()
        if partial > 0, archiveSize - min(archiveSize, partial) <= delta.fetchBytes {
            return .wholeArchive("resuming the interrupted download (\(archiveSize - min(archiveSize, partial)) bytes left) transfers no more than ranges (\(delta.fetchBytes) bytes)")
        }
        return .differential(delta)
    }

    /// Where each of `files` comes from: installed releases, what earlier attempts fetched
    /// (hashed again unless this updater verified it), the bundle (digests cached), else the
    /// archive; a chunked file whose content is nowhere on disk gets an origin per chunk
    /// (`fetchedChunks`: the chunks earlier attempts kept), where one of its chunks is on disk,
    /// kept or shared (`ChunkPlanner.worthRebuilding`), else it is fetched whole like any file.
    /// nil: a file has no location.
    /// `wholeWhereUnshared`: an update's plan (a group's fetch keeps every chunked file chunked:
    /// fetched whole, a 100 MiB group's files cost 16 times the overhead its chunks do).
    func plan(_ files: [ManifestFile], chunkLists: [String: [ChunkRecord]], linked: Set<String> = [], chunkSize: Int, _ state: StoreState,
              wholeWhereUnshared: Bool = false, fetchedChunks: [String: String], byDelta: [String: DeltaTake] = [:]) throws -> FilePlan? {
        let installed = installedFiles(state, sharing: files)
        let fetched = verifiedFetchedFiles()
        var bundle: [String: String] = [:]
        if let bundleDir {
            let local = FileOrigin.onDisk(installed, fetched)
            let missing = Set(files.filter { local($0) == nil }.map(\.size))
            var digests = BundleDigests(bundleDir: bundleDir, cachePath: store.bundleDigestsPath)
            bundle = try digests.digests(sizes: missing, cancel: cancel)
            if digests.hashedCount > 0 { log(.info, "hashed \(digests.hashedCount) bundle files (cached for later updates)") }
        }
        let local = FileOrigin.onDisk(installed, fetched, bundle)
        // Chunked files whose content is not on disk: rebuilt from chunks, only new ones
        // fetched, where some chunk need not be fetched for them; the others are fetched whole.
        var rebuilt = files.filter { local($0) == nil && byDelta[$0.sha256] == nil }.compactMap { f in chunkLists[f.path].map { (file: f, chunks: $0) } }
        var chunksOnDisk = LocalChunks()
        if !rebuilt.isEmpty {
            let scanned: Int
            // Chunked files earlier attempts fetched whole hold their chunks too: a chunk a
            // killed attempt fetched for one file is not fetched again for another.
            let fetchedChunked = fetched.isEmpty ? [] : files.compactMap { f in
                fetched[f.sha256].flatMap { path in chunkLists[f.path].map { (path: path, sha256: f.sha256, chunks: $0) } }
            }
            (chunksOnDisk, scanned) = try store.localChunks(state, for: rebuilt, chunkSize: chunkSize, bundleDir: bundleDir,
                                                            known: installedCache?.read.records ?? [:], fetchedFiles: fetchedChunked,
                                                            cancel: cancel)
            if scanned > 0 { log(.info, "cut \(scanned) files on disk into chunks to find those the new release shares (cached for later updates)") }
            // An update rebuilds only files with a chunk it need not fetch for them; a group's
            // fetch keeps all chunked (its chunk lists are what a killed fetch resumes by).
            if wholeWhereUnshared {
                rebuilt = ChunkPlanner.worthRebuilding(rebuilt, local: chunksOnDisk, fetched: fetchedChunks, linked: linked)
            }
        }
        guard var delta = FilePlan.make(files, local: local, chunked: Set(rebuilt.map(\.file.path)), byDelta: Set(byDelta.keys)) else { return nil }
        delta.deltas = byDelta.values.sorted { $0.entry.offset < $1.entry.offset }
        if !rebuilt.isEmpty {
            let planned = ChunkPlanner.plan(rebuilt, local: chunksOnDisk, fetched: fetchedChunks, linked: linked)
            delta.chunked = planned.files
            delta.chunkRanges = planned.ranges
        }
        return delta
    }

    /// Fetches the plan's ranges (retrying transient failures; files verified by one attempt
    /// are not fetched again), then builds the release from files on disk. false: the update
    /// must fall back to the whole archive (`DifferentialFallback`); the staging release is gone then.
    func installDifferentially(_ c: Candidate, _ plan: FilePlan) throws -> Bool {
        var plan = plan
        if !c.archive.isFile { try allowMetered(plan.fetchBytes, "version \(c.version)") }
        log(.info, "differential update: \(plan.fetchEntries) files and chunks in \(plan.ranges.count + plan.chunkRanges.count) ranges, \(plan.fetchBytes) of \(c.manifest.archiveSize ?? 0) archive bytes")
        // The files are made durable as they are kept, behind the fetch and the rebuilds.
        let syncBehind = SyncBehind()
        let fetch = RangeFetch(source: c.archive, archiveSize: c.manifest.archiveSize ?? 0,
                               dir: store.fetchedDir(c.manifest.archiveDigest), http: http, parallel: config.parallelDownloads,
                               cancel: cancel, progress: progress, sources: context.sources, syncBehind: syncBehind)
        var made: [String: String] = [:]
        do {
            try store.prepareStaging(c.releaseID)
            progress.report(Progress(phase: .download, bytesDone: 0, bytesTotal: plan.fetchBytes,
                                     filesDone: 0, filesTotal: UInt64(plan.fetchEntries)))
            // Deltas first (small, and what they can't make joins the ranges); then chunks:
            // they lie before the small files in name order of most packs, and an
            // interruption keeps what arrived either way.
            let (fromDeltas, failed) = try fetchDeltas(plan, into: store.fetchedDir(c.manifest.archiveDigest))
            made = fromDeltas
            if !failed.isEmpty {
                plan.ranges = FilePlan.coalesce((plan.ranges.flatMap(\.entries) + failed).sorted { $0.location!.headerOffset < $1.location!.headerOffset },
                                                gap: FilePlan.coalesceGap, maxRequest: FilePlan.maxRequestBytes)
                // Held to the same limits as the plan was: a host that spoils every delta
                // costs no more than the metered cap and the whole archive.
                if !c.archive.isFile { try allowMetered(plan.fetchBytes, "version \(c.version)") }
                guard plan.paysOff(archiveSize: c.manifest.archiveSize ?? 0, maxPercent: config.differentialMaxPercent) else {
                    throw DifferentialFallback(message: "with the files whose deltas failed, ranges would transfer \(plan.fetchBytes) of the archive's \(c.manifest.archiveSize ?? 0) bytes (more than \(config.differentialMaxPercent)%)")
                }
            }
            // Chunks kept by earlier attempts, then those fetched now as they arrive.
            let arriving = Arrivals(store.fetchedChunks(c.manifest.archiveDigest))
            // Installed bytes that changed under a rebuild (a fallback) show once the fetch is done.
            if let failure = try fetchRebuildingAhead(c, plan, fetch, chunks: arriving, into: store.fetchedDir(c.manifest.archiveDigest),
                                                      syncBehind: syncBehind) {
                throw failure
            }
            let chunks = arriving.all
            progress.report(Progress(phase: .download, bytesDone: plan.fetchBytes, bytesTotal: plan.fetchBytes,
                                     filesDone: UInt64(plan.fetchEntries), filesTotal: UInt64(plan.fetchEntries)), final: true)
            for path in fetch.fetched.values { verifiedFetched.insert(path) }
            for path in made.values { verifiedFetched.insert(path) }
            try cancel.check()
            let fetched = fetch.fetched.merging(made) { a, _ in a }
            try Installer(store: store, maxReleaseBytes: config.maxReleaseBytes, cancel: cancel, progress: progress, syncBehind: syncBehind)
                .assemble(c, plan, fetched: { fetched[$0.sha256] }, chunks: chunks, spareRead: spareRead, log: log)
            return true
        } catch let f as DifferentialFallback {
            // A file that failed to sync is gone (and may be what the fallback missed): the
            // disk's error is the update's, not a reason to download the whole archive.
            _ = try syncBehind.finish()
            for path in fetch.fetched.values { verifiedFetched.insert(path) }
            for path in made.values { verifiedFetched.insert(path) }
            // A rebuild that copied from a file fetched earlier may have failed because that
            // file changed since it was verified: it is hashed again before anything takes it.
            // (The plan's chunked files share one list of the files on disk they copy from.)
            plan.chunked.first?.localFiles.forEach(forgetVerified)
            store.discardStaging(c.releaseID)
            log(.warning, "\(f.message); downloading the whole archive instead")
            try store.requireFreeSpace(try spaceNeeded(.wholeArchive(f.message), c, store.loadState()), for: "version \(c.version)")
            return false
        }
    }

    /// Fetches the plan's chunks, then its whole files (each retrying transient failures), while
    /// its chunked files are rebuilt into `dir` on a thread of their own, each as soon as its
    /// chunks are in `chunks` (those kept before, and what the chunk fetch adds), so that the
    /// rebuilds overlap the fetch and `Installer.place` finds them made. A failed fetch stops the
    /// rebuilds and is thrown; what stopped a rebuild is returned, for the caller to throw where
    /// it decides.
    /// `chunkDir`: where the chunks are kept (nil: the update's, `downloads/<archive>.chunks/`).
    func fetchRebuildingAhead(_ c: Candidate, _ plan: FilePlan, _ fetch: RangeFetch, chunks: Arrivals<String, String>, chunkDir: String? = nil,
                              into dir: String, syncBehind: SyncBehind) throws -> Error? {
        let rebuilding = CancelToken(within: cancel)
        let ahead = Installer(store: store, maxReleaseBytes: config.maxReleaseBytes, cancel: rebuilding, progress: progress, syncBehind: syncBehind)
        let chunked = plan.chunked
        // Chunks fetched now go straight into the files being rebuilt; those an interrupted
        // attempt wrote there were hashed again when the plan was made (`FilePlan.inPlace`;
        // here for a plan that did not look), and the ones that match are not fetched again.
        let direct = DirectChunks(chunked, dir: dir)
        if let inPlace = plan.inPlace {
            for (key, path) in inPlace { chunks.put(key, path) }
        } else if !plan.chunkRanges.isEmpty, !direct.isEmpty {
            for (key, path) in direct.present() { chunks.put(key, path) }
        }
        if !plan.chunkRanges.isEmpty, !direct.isEmpty { try FS.makeDirectories(dir) }
        let failure = Locked<Error?>(nil)
        try alongside({
            do { try ahead.rebuildAhead(chunked, arriving: chunks, into: dir, direct: direct) } catch { failure.withLock { $0 = error } }
        }, stopping: rebuilding) {
            do {
                if !plan.chunkRanges.isEmpty { try fetchChunks(c, plan, into: chunkDir, arriving: chunks, direct: direct) }
                chunks.close()
                try context.retrying(c.archive) { try fetch.attempt(plan) }
            } catch {
                // Cancelled before the table closes: the rebuild waiting there is told the fetch
                // failed (it keeps what was written in place), not that a chunk never came.
                rebuilding.cancel()
                chunks.close()
                throw error
            }
        }
        return failure.withLock { $0 }
    }

    /// On a metered network (option `metered`), refuses a transfer that plans more than
    /// `metered_max_bytes`, before a byte of it moves: the host asks its user, then allows it.
    /// `known`: false when the size is only what a HEAD said (or nothing): an unknown size is
    /// refused as more than any threshold.
    func allowMetered(_ bytes: UInt64, known: Bool = true, _ what: String) throws {
        guard config.metered else { return }
        if !known && bytes == 0 {
            throw AssetPatchError(.metered, "\(what): an archive of unknown size on a metered network; allow it by setting metered to 0")
        }
        guard bytes > config.meteredMaxBytes else { return }
        throw AssetPatchError(.metered, "\(what): \(bytes) bytes to transfer on a metered network, more than metered_max_bytes (\(config.meteredMaxBytes)); allow it by raising metered_max_bytes or setting metered to 0")
    }

    /// Fetches the plan's chunk ranges into `downloads/<archive>.chunks/`, retrying transient
    /// failures (chunks kept by an attempt are not asked for again); returns every chunk now
    /// there, by name (`ChunkPlanner.key`). `arriving`: the chunks there before, to which each
    /// chunk is added as it is kept (work beside the fetch waits there).
    @discardableResult
    /// `direct`: where chunks go straight into the files being rebuilt.
    func fetchChunks(_ c: Candidate, _ plan: FilePlan, into dir: String? = nil, arriving: Arrivals<String, String>? = nil,
                     direct: DirectChunks? = nil) throws -> [String: String] {
        let dir = dir ?? store.chunksDir(c.manifest.archiveDigest)
        try FS.makeDirectories(dir)
        let fetch = RangeFetch(source: c.archive, archiveSize: c.manifest.archiveSize ?? 0, dir: dir, http: http,
                               parallel: config.parallelDownloads, cancel: cancel, progress: progress, sources: context.sources)
        // Kept by the receivers, on the fetch's worker threads.
        let kept = arriving ?? Arrivals(store.chunks(in: dir))
        let history = LinkedHistory(plan.chunked, dir: dir, direct: direct)
        let attempt = {
            let have = kept.all
            let left = ChunkPlanner.leavingOut(plan.chunkRanges) {
                have[ChunkPlanner.key($0)] != nil || have[$0.record.id.hex] != nil || have[DirectChunks.key($0.offset)] != nil
            }
            let receivers = left.map {
                ChunkReceiver($0, dir: dir, shown: c.archive.shown, history: history.before, direct: direct) { name, path in kept.put(name, path) }
            }
            try fetch.drive(receivers) {}
        }
        try context.retrying(c.archive) { try attempt() }
        return kept.all
    }
}
