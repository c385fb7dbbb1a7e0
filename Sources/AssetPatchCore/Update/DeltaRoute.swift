import Glibc

/// The deltas a candidate's delta file offers, by target sha256 hex, and where that file is.
struct DeltaOffer {
    var location: Location
    var size: UInt64
    var entries: [String: DeltaEntry]
}

/// Deltas in a differential update: the delta file the head offers from a release this data
/// directory has, the files it makes for fewer bytes than the plan would fetch, and their
/// fetch. Deltas only ever save bytes: a delta file that can't be read, or a delta that does not
/// make its file, leaves those files to the archive.
extension Updater {
    /// The deltas of the delta file `c`'s head offers from an installed release (the active
    /// one first), its page fetched once and kept with the index pages; nil when there is
    /// none, or it can't be read (logged).
    func deltaOffer(_ c: Candidate, _ state: StoreState) throws -> DeltaOffer? {
        guard config.differential, !c.deltaFiles.isEmpty else { return nil }
        let ids = [state.active, state.pending].compactMap { $0?.id } + state.kept.map(\.id)
        guard let pick = ids.lazy.compactMap({ id in c.deltaFiles.first { id.hasSuffix("-" + $0.source.from.prefix(16)) } }).first else {
            return nil
        }
        if let cached = deltaOfferCache, cached.page == pick.source.page.hex { return cached.offer }
        let offer = try readDeltaOffer(pick.source, pick.location)
        deltaOfferCache = (pick.source.page.hex, offer)
        return offer
    }

    private func readDeltaOffer(_ source: DeltaSource, _ location: Location) throws -> DeltaOffer? {
        let pages = PageStore(store, readOnly: readOnly)
        do {
            if !pages.has(source.page) {
                try context.retrying(location) {
                    try PageFetch(source: location, archiveSize: source.size, http: http, cancel: cancel, pages: pages)
                        .fetch([PageFetch.Wanted(ref: source.page, offset: 0)])
                }
            }
            guard let bytes = pages.load(source.page) else { return nil }
            let entries = try DeltaPage.decode(bytes, fileSize: source.size, pageSize: UInt64(source.page.compressedSize), source: location.shown)
            return DeltaOffer(location: location, size: source.size,
                              entries: Dictionary(entries.map { (Hex.encode($0.target), $0) }, uniquingKeysWith: { a, _ in a }))
        } catch let e as AssetPatchError where e.status == .cancelled {
            throw e
        } catch {
            log(.warning, "\(location.shown): \(SourceSpread.describe(error)); the update goes without deltas")
            return nil
        }
    }

    /// Where `e`'s base lies among `installed` (same sha256 and size), nil when nowhere.
    private func base(of e: DeltaEntry, in installed: InstalledFiles) -> InstalledFile? {
        guard let digest = Sha256(bytes: e.base), let file = installed[digest], file.size == e.baseSize else { return nil }
        return file
    }

    /// The contents (sha256 hex) the offer's deltas make from a base on disk: their chunk lists
    /// are not read. (The installed files by digest, read for this alone: the plan's own
    /// lookup is keyed by the new release's files, not known yet.)
    func deltaTargets(_ c: Candidate, _ state: StoreState) throws -> Set<String> {
        guard let offer = try deltaOffer(c, state) else { return [] }
        var installed = store.installedFiles(state)
        installed.finish()
        return Set(offer.entries.filter { base(of: $0.value, in: installed) != nil }.keys)
    }

    /// `plan` again (`replan`) with the files a delta makes for fewer bytes than it fetches for
    /// them, when there are any.
    func withDeltas(_ plan: FilePlan, _ c: Candidate, _ state: StoreState,
                    replan: ([String: DeltaTake]) throws -> FilePlan?) throws -> FilePlan {
        guard plan.fetchBytes > 0, let offer = try deltaOffer(c, state) else { return plan }
        let installed = installedFiles(state, sharing: c.manifest.files)
        let takes = DeltaTake.choose(plan, offer: offer.entries) { base(of: $0, in: installed)?.place.full }
        guard !takes.isEmpty, var out = try replan(takes) else { return plan }
        out.deltaFile = (offer.location, offer.size)
        log(.info, "\(takes.count) files from deltas: \(out.deltas.reduce(0) { $0 + $1.entry.length }) bytes of \(offer.location.shown)")
        return out
    }

    /// Fetches and applies the plan's deltas into `dir`, retrying transient failures (files
    /// made by an attempt are not asked for again); returns the files made (by sha256 hex) and
    /// those left to the archive.
    func fetchDeltas(_ plan: FilePlan, into dir: String) throws -> (made: [String: String], failed: [ManifestFile]) {
        guard let file = plan.deltaFile, !plan.deltas.isEmpty else { return ([:], []) }
        try FS.makeDirectories(dir)
        let made = Locked([String: String]())
        let failed = Locked([String: (file: ManifestFile, why: String)]())
        let fetch = RangeFetch(source: file.location, archiveSize: file.size, dir: dir, http: http, parallel: config.parallelDownloads,
                               cancel: cancel, progress: progress)
        let attempt = {
            let left = plan.deltas.filter { t in made.withLock { $0[t.file.sha256] == nil } && failed.withLock { $0[t.file.sha256] == nil } }
            try fetch.drive(DeltaTake.ranges(left).map { r in
                DeltaReceiver(r.range, takes: r.takes, dir: dir, shown: file.location.shown,
                              onFile: { f, path in made.withLock { $0[f.sha256] = path } },
                              onFailure: { f, why in failed.withLock { $0[f.sha256] = (f, why) } })
            }) {}
        }
        do {
            try context.retrying(file.location) { try attempt() }
        } catch let e as AssetPatchError where e.status == .cancelled {
            throw e
        } catch {
            log(.warning, "\(file.location.shown): \(SourceSpread.describe(error)); the rest comes from the archive")
        }
        for (f, why) in failed.withLock({ $0.values }) {
            log(.warning, "\(file.location.shown): the delta of \"\(f.path)\" \(why); fetching it from the archive")
        }
        let done = made.withLock { $0 }
        return (done, plan.deltas.filter { done[$0.file.sha256] == nil }.map(\.file))
    }
}
