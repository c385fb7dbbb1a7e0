import Glibc

/// How an update gets its files: the route (differential or the whole archive), chosen from what
/// is already on disk, and the differential route carried out.
extension Updater {
    /// How an update gets its files.
    enum Route {
        case differential(DifferentialPlan)
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
        guard c.manifest.locatesEveryFile else { return .wholeArchive("the manifest has no per-file locations") }
        let installed = installedFiles(state)
        let fetched = verifiedFetchedFiles()
        var bundle: [String: String] = [:]
        if let bundleDir {
            let local = onDisk(installed, fetched)
            let missing = Set(c.manifest.files.filter { local($0) == nil }.map(\.size))
            var digests = BundleDigests(bundleDir: bundleDir, cachePath: store.bundleDigestsPath)
            bundle = try digests.digests(sizes: missing, cancel: cancel)
            if digests.hashedCount > 0 { log(.info, "hashed \(digests.hashedCount) bundle files (cached for later updates)") }
        }
        let local = onDisk(installed, fetched, bundle)
        let chunkLists = c.index?.chunks ?? [:]
        guard var delta = DifferentialPlan.make(c.manifest.files, local: local, chunked: Set(chunkLists.keys)) else {
            return .wholeArchive("the manifest has no per-file locations")
        }
        // Chunked files whose content is not on disk: rebuilt from chunks, only new ones fetched.
        let rebuilt = c.manifest.files.filter { local($0) == nil }.compactMap { f in chunkLists[f.path].map { (file: f, chunks: $0) } }
        if !rebuilt.isEmpty {
            let planned = ChunkPlanner.plan(rebuilt, local: try localChunks(state, for: rebuilt, chunkSize: c.manifest.index?.chunkSize ?? 0),
                                            fetched: fetchedChunks(c))
            delta.chunked = planned.files
            delta.chunkRanges = planned.ranges
        }
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

    /// Fetches the plan's ranges (retrying transient failures; files verified by one attempt
    /// are not fetched again), then builds the release from files on disk. nil: the update
    /// must fall back to the whole archive (`DifferentialFallback`); the staging release is gone then.
    func installDifferentially(_ c: Candidate, _ plan: DifferentialPlan) throws -> ReleaseRecord? {
        log(.info, "differential update: \(plan.fetchEntries) files and chunks in \(plan.ranges.count + plan.chunkRanges.count) ranges, \(plan.fetchBytes) of \(c.manifest.archiveSize ?? 0) archive bytes")
        let fetch = RangeFetch(source: c.archive, archiveSize: c.manifest.archiveSize ?? 0,
                               dir: store.fetchedDir(c.manifest.archiveDigest), http: http, parallel: config.parallelDownloads,
                               cancel: cancel, progress: progress)
        do {
            try store.prepareStaging(c.releaseID)
            progress.report(Progress(phase: .download, bytesDone: 0, bytesTotal: plan.fetchBytes,
                                     filesDone: 0, filesTotal: UInt64(plan.fetchEntries)))
            // Chunks first: they lie before the small files in name order of most packs, and
            // an interruption keeps what arrived either way.
            let chunks = plan.chunkRanges.isEmpty ? fetchedChunks(c) : try fetchChunks(c, plan)
            try context.retrying(c.archive) { try fetch.attempt(plan) }
            progress.report(Progress(phase: .download, bytesDone: plan.fetchBytes, bytesTotal: plan.fetchBytes,
                                     filesDone: UInt64(plan.fetchEntries), filesTotal: UInt64(plan.fetchEntries)), final: true)
            for path in fetch.fetched.values { verifiedFetched.insert(path) }
            try cancel.check()
            return try Installer(store: store, maxReleaseBytes: config.maxReleaseBytes, cancel: cancel, progress: progress)
                .assemble(c, plan, fetched: fetch.fetched, chunks: chunks)
        } catch let f as DifferentialFallback {
            for path in fetch.fetched.values { verifiedFetched.insert(path) }
            store.discardStaging(c.releaseID)
            log(.warning, "\(f.message); downloading the whole archive instead")
            try store.requireFreeSpace(try spaceNeeded(.wholeArchive(f.message), c, store.loadState()), for: "version \(c.version)")
            return nil
        }
    }

    /// Writes what accepting a manifest changed in `accepted` (made from the snapshot
    /// `before`: the pins and the downgrade marks) into the current state, judging it again by
    /// the keys in force (`Store.commit`) when the client verifies.
    static func recordAcceptance(_ accepted: StoreState, before: StoreState, judgement: Judgement?, in store: Store) throws {
        if var j = judgement {
            j.vouch = nil  // what it vouched for was renewed when the evaluation committed it
            try store.commit(j, acceptance: (accepted, before))
        } else {
            try store.modifyState { $0.merge(acceptance: accepted, before: before) }
        }
    }

    /// Fetches the plan's chunk ranges into `downloads/<archive>.chunks/`, retrying transient
    /// failures (chunks kept by an attempt are not asked for again); returns every chunk now
    /// there, by sha256 hex.
    func fetchChunks(_ c: Candidate, _ plan: DifferentialPlan) throws -> [String: String] {
        let dir = store.chunksDir(c.manifest.archiveDigest)
        try FS.makeDirectories(dir)
        let fetch = RangeFetch(source: c.archive, archiveSize: c.manifest.archiveSize ?? 0, dir: dir, http: http,
                               parallel: config.parallelDownloads, cancel: cancel, progress: progress)
        var kept = fetchedChunks(c)
        let attempt = {
            let left = plan.chunkRanges.compactMap { r -> ChunkRange? in
                var r = r
                r.chunks.removeAll { kept[$0.record.id.hex] != nil }
                guard let first = r.chunks.first, let last = r.chunks.last else { return nil }
                r.start = first.offset
                r.end = last.offset + UInt64(last.record.compressedSize)
                return r
            }
            let receivers = left.map { ChunkReceiver($0, dir: dir, shown: c.archive.shown) { record, path in kept[record.id.hex] = path } }
            try fetch.drive(receivers) {}
        }
        try context.retrying(c.archive) { try attempt() }
        return kept
    }

    /// The chunks earlier attempts at this archive fetched, by sha256 hex (hashed again when used).
    func fetchedChunks(_ c: Candidate) -> [String: String] {
        let dir = store.chunksDir(c.manifest.archiveDigest)
        var out: [String: String] = [:]
        for name in (try? FS.list(dir)) ?? [] where Hex.isHex(name, length: 64) { out[name] = dir + "/" + name }
        return out
    }

    /// Where the chunks an update can copy lie: the installed releases' chunked files (active,
    /// pending, kept; their chunk lists in the page store), and for each file `rebuilt` needs,
    /// the file at its path in an installed release that has no chunk list for it (installed
    /// from a format-1 manifest) and in the bundle, cut and hashed as the publisher cut the new
    /// release (`ChunkScan`, cached).
    func localChunks(_ state: StoreState, for rebuilt: [(file: ManifestFile, chunks: [ChunkRecord])], chunkSize: Int) throws -> LocalChunks {
        var out = LocalChunks()
        let pages = PageStore(store)
        var listed = Set<String>()
        var releases: [String] = []
        for ref in [state.active, state.pending].compactMap({ $0 }) + state.kept {
            releases.append(store.filesDir(ref.id))
            guard let record = try? store.loadRelease(ref.id), let root = record.indexRoot else { continue }
            for f in pages.files(root: root) where !f.chunkPages.isEmpty {
                let path = store.filesDir(ref.id) + "/" + f.file.path
                out.add(path, pages: f.chunkPages) { pages.chunks(of: $0) }
                listed.insert(path)
            }
        }
        if let chunker = Chunker(averageSize: chunkSize) {
            var scan = ChunkScan(store: store, chunker: chunker, cancel: cancel)
            var seen = Set<[UInt64]>()
            for (file, _) in rebuilt {
                var candidates = releases.map { $0 + "/" + file.path }.filter { !listed.contains($0) }
                if let bundleDir { candidates.append(bundleDir + "/" + file.path) }
                for path in candidates {
                    // One scan per file on disk: releases share unchanged files as hard links.
                    guard let f = BundleDigests.Fingerprint(path), seen.insert([f.device, f.inode]).inserted else { continue }
                    if let chunks = try scan.chunks(of: path) { out.add(path, chunks) }
                }
            }
            if scan.scanned > 0 {
                log(.info, "cut \(scan.scanned) files on disk into chunks to find those the new release shares (cached for later updates)")
            }
        }
        out.seal()
        return out
    }
}
