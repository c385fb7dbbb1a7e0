import Glibc

extension Candidate {
    /// The release as the state records it once installed.
    var ref: ReleaseRef {
        ReleaseRef(id: releaseID, version: version, verified: manifest.signatureVerified, channel: manifest.channelName,
                   signers: manifest.signatureVerified ? manifest.signers : nil,
                   content: manifest.contentDigest.isEmpty ? nil : manifest.contentDigest)
    }
}

/// What an update did.
enum UpdateOutcome {
    case noUpdate
    case installed(Candidate)
}

/// One update or check, step by step: manifest (fetch, verify, judge) -> plan -> fetch ->
/// install -> activate. Runs on one thread; the client serialises updates and swaps in the
/// result. Every step reports progress and checks for cancellation.
final class Updater {
    let store: Store
    /// The options; `manifest` is the head read in place of `manifest_url` when that names one
    /// (`follow`).
    private(set) var config: ClientConfig
    /// `manifest_url` and the mirrors as given (the host's, then those a verified head listed).
    let given: (manifest: Location?, mirrors: [Location])
    /// HTTP, cancel, progress, log and the retry policy: what every transfer of this update uses.
    var context: FetchContext
    var cancel: CancelToken { context.cancel }
    var progress: ProgressReporter { context.progress }
    var log: (LogLevel, String) -> Void { context.log }
    var http: HTTPClient { context.http }
    let bundleDir: String?
    /// A look that changes nothing in the data directory (`status`, `inspect`): nothing is
    /// kept, judged on disk or downloaded.
    let readOnly: Bool
    /// The archive's download of this update (`download(for:)`).
    var archiveDownload: ArchiveDownload?
    /// The last archive download resumed a partial file and its digest failed.
    var resumedDamagedPartial = false
    /// Fetched files verified by this updater (its retries trust them without hashing again),
    /// by path, and by content in a directory of them (a whole archive's extracted files: no
    /// path each, which at 100,000 files were 27 MB).
    var verifiedFetched = Set<String>()
    var verifiedInDir: [String: Set<Sha256>] = [:]
    /// A group fetch's own downloads (`downloads/groups/<id>@<group>`): its earlier attempts' files.
    var groupDownload: String?
    /// The active release's paths on disk (`groupsInstalled`), read once per updater.
    var activePathsCache: (id: String, paths: Set<String>)?
    /// The installed releases' files by sha256, read from their records once per updater: the
    /// plan, the free-space check and the installer all ask.
    var installedCache: (ids: Set<String>, files: InstalledFiles, read: Store.RecordsRead)?
    /// The delta offer read for a candidate (`deltaOffer`), by its delta page: read once for
    /// the index walk and the plan.
    var deltaOfferCache: (page: String, offer: DeltaOffer?)?

    /// `sharing`: the new release's files, whose paths the installed ones share where equal.
    func installedFiles(_ state: StoreState, sharing: [ManifestFile] = []) -> InstalledFiles {
        if let cached = installedCache, cached.ids == state.liveReleaseIDs { return cached.files }
        var read = Store.RecordsRead()
        let files = store.installedFiles(state, sharing: sharing, read: &read)
        installedCache = (state.liveReleaseIDs, files, read)
        return files
    }

    /// The spare tree's record as `installedFiles` read it, if it did (`SpareTree.Base`).
    var spareRead: SpareTree.Base? { installedCache?.read.spare }

    init(store: Store, config: ClientConfig, bundleDir: String?, cancel: CancelToken, progress: ProgressHandler?, readOnly: Bool = false,
         log: @escaping (LogLevel, String) -> Void) {
        self.readOnly = readOnly
        self.store = store
        self.bundleDir = bundleDir
        self.config = config
        // The host's mirrors first, then those the newest verified head listed. With any, the
        // `header` options go to the primary's origin only.
        var mirrors = config.mirrors
        if config.headMirrors && config.verifies { mirrors += store.keptMirrors().compactMap(Location.init) }
        given = (config.manifest, mirrors)
        var settings = config.http
        if let primary = config.manifest, !mirrors.isEmpty { settings.headersOrigin = URLs.origin(primary.url) }
        context = FetchContext(http: HTTPClient(settings: settings, cancel: cancel), cancel: cancel,
                                  progress: ProgressReporter(progress, cancel: cancel, held: config.http.control.map { control in
                                      { [background = config.http.background] in control.mustHold(background: background) }
                                  }), log: log, retry: RetryPolicy())
        follow(nil)
    }

    /// Reads the head `reference` names beside `manifest_url` (and beside each mirror) from now
    /// on; nil: `manifest_url` itself. Returns the head's location, nil when it reads
    /// `manifest_url` (or the reference points off its origin).
    @discardableResult
    func follow(_ reference: String?) -> Location? {
        guard let primary = given.manifest else { return nil }
        let head = reference.flatMap { NamedHead.location($0, beside: primary) }
        config.manifest = head ?? primary
        context.sources = nil
        if !given.mirrors.isEmpty {
            // Each mirror's head beside it, as the primary's.
            let mirrors = head == nil ? given.mirrors : given.mirrors.map { m in reference.flatMap { NamedHead.location($0, beside: m) } ?? m }
            context.sources = Sources(primary: head ?? primary, mirrors: mirrors, hedgeMs: config.hedgeMs, log: log)
        }
        return head
    }

    // MARK: The sequence

    /// A whole update; the caller holds the data directory's lock. `state` is the state read
    /// under that lock; it is saved (accepting a manifest pins the package and moves the
    /// downgrade mark) and, on success, switched to the new release.
    func run(_ state: inout StoreState, _ e: inout Evaluation) throws -> UpdateOutcome {
        // What a run read of the installed releases (at 100,000 files, 15 MB of their files)
        // goes with it: the client builds the new release's resolve table next.
        defer { (installedCache, activePathsCache) = (nil, nil) }
        let before = state
        progress.report(Progress(phase: .check))
        guard var candidate = try evaluate(&state, &e) else {
            if state != before { try store.recordAcceptance(state, before: before, judgement: e.judgement) }
            progress.report(Progress(phase: .check), final: true)
            progress.report(Progress(phase: .done), final: true)
            let why: String
            switch e.noUpdate?.reason {
            case .older?: why = "the manifest's version \(e.noUpdate!.version) is older than one accepted before"
            case .badVersion?: why = "version \(e.noUpdate!.version) was rolled back from"
            case .inBundle?: why = "the bundle carries version \(e.noUpdate!.version) or newer"
            case .notInRollout?: why = "version \(e.noUpdate!.version) is not rolled out to this client yet"
            default: why = "version \(state.active?.version ?? 0) is current"
            }
            log(.info, "no update: \(why)")
            return .noUpdate
        }
        if state != before { try store.recordAcceptance(state, before: before, judgement: e.judgement) }
        progress.report(Progress(phase: .check), final: true)
        log(.info, "updating to version \(candidate.version) from \(candidate.archive.shown)")
        e.updating = true
        let digest = candidate.manifest.archiveDigest
        e.resumed = [store.partialPath(digest), store.fetchedDir(digest), store.chunksDir(digest)].contains(where: FS.exists)

        // The kept release's record read for its fields only: whether it is intact.
        if state.kept.contains(where: { $0.id == candidate.releaseID }), (try? store.loadRelease(candidate.releaseID, listingFiles: false)) != nil {
            // A kept release offered again (a host moving back to a channel that offers it):
            // it is on disk, verified when it was installed.
            log(.info, "version \(candidate.version) is kept on disk: served again without a download")
            e.route = "kept"
            try activate(candidate, state: &state, inPlace: true)
            progress.report(Progress(phase: .done), final: true)
            return .installed(candidate)
        }
        var startedOver = false
        var sourcesLeft = (context.sources?.count ?? 1) - 1
        while true {
            do {
                try readIndex(&candidate, state)
                // Read before anything plans a part of the release (a group), so that the
                // installed files share the paths of all of its files.
                _ = installedFiles(state, sharing: candidate.manifest.files)
                candidate.bundleCopies = try bundleCopies(candidate)
                candidate.groupFetchBytes = try groupFetchBytes(candidate, state)
                let route = try chooseRoute(candidate, state)
                try store.requireFreeSpace(try spaceNeeded(route, candidate, state), for: "version \(candidate.version)")
                if case .differential = route { e.route = "differential" }
                var installed = false
                if case let .differential(plan) = route { installed = try installDifferentially(candidate, plan) }
                if !installed {
                    e.route = "whole"
                    try installWholeArchive(candidate, state)
                }
                try cancel.check()
                try activate(candidate, state: &state)
                break
            } catch {
                store.discardStaging(candidate.releaseID)
                if let e = error as? AssetPatchError, e.status == .integrity || e.status == .archive {
                    // The archive matched the manifest's digest yet is unusable: don't resume it.
                    store.discardPartial(candidate.manifest.archiveDigest)
                }
                if let e = error as? AssetPatchError, e.status == .integrity || e.status == .archive, sourcesLeft > 0,
                   let sources = context.sources, let i = archiveDownload?.servedBy {
                    // The archive one source sent is not the signed one: the next source sends it.
                    sourcesLeft -= 1
                    sources.demote(i, e.message)
                    archiveDownload?.servedBy = nil
                    log(.warning, "\(e.message); downloading the archive from the next source")
                    continue
                }
                if let e = error as? AssetPatchError, e.isDiskFull {
                    // A full disk breaks the app too: give back what this update downloaded.
                    store.discardDownloads()
                    try? store.dropSpare()
                    log(.warning, "the disk is full: partial downloads and the spare tree dropped")
                }
                // A partial archive kept by an earlier attempt can hold bytes a power cut never
                // wrote (its size persisted, some of its data did not): its digest then fails.
                // It is gone now; the download starts over, once.
                if resumedDamagedPartial && !startedOver {
                    startedOver = true
                    resumedDamagedPartial = false
                    let why = (error as? AssetPatchError)?.message ?? "\(error)"
                    log(.warning, "\(why); the partial archive kept from an earlier attempt was damaged (a power cut, or a server that changed the file): downloading the archive again from its start")
                    continue
                }
                throw error
            }
        }
        progress.report(Progress(phase: .done), final: true)
        log(.info, "installed version \(candidate.version)")
        return .installed(candidate)
    }

    /// What an update would do now (`assetpatch_check`, `assetpatch status`): the release it
    /// would install, how, and the bytes it would transfer. `state` gets the manifest's
    /// acceptance (package pin, mark).
    /// A check never downloads the archive: when the index cannot be read by range, the
    /// preview is the whole archive, and why.
    func preview(_ state: inout StoreState, _ e: inout Evaluation) throws -> UpdatePreview? {
        guard var candidate = try evaluate(&state, &e) else { return nil }
        let unread = try readIndex(&candidate, state, mayDownload: false)
        let archiveBytes = candidate.manifest.archiveSize ?? 0
        let m = candidate.manifest
        var summary = ReleaseSummary(version: candidate.version, created: m.created, label: m.label, notes: m.notes,
                                     mandatory: m.mandatory, signatureVerified: m.signatureVerified, markedGood: false)
        summary.channel = m.channelName
        summary.rolloutBasisPoints = m.rollout.map { Rollout.basisPoints($0.percent(at: unixTime())) }
        if let unread {
            return UpdatePreview(candidate: summary, wholeArchiveReason: unread, transferBytes: try transferEstimate(download(for: candidate)),
                                 archiveBytes: archiveBytes, requests: 1)
        }
        switch try chooseRoute(candidate, state) {
        case let .differential(plan):
            return UpdatePreview(candidate: summary, plan: plan, archiveBytes: archiveBytes)
        case let .wholeArchive(reason):
            let transfer = try transferEstimate(download(for: candidate))
            return UpdatePreview(candidate: summary, wholeArchiveReason: reason, transferBytes: transfer,
                                 archiveBytes: archiveBytes, requests: 1, fetchedFiles: candidate.manifest.files.map(\.path))
        }
    }

    /// Bytes the update will write: the files it extracts, fetches or copies (files linked from
    /// installed releases cost nothing), the files it rebuilds from chunks and the chunks it
    /// keeps for them, 4 KiB per file for block rounding, and for the whole archive what is
    /// still to download of it. A legacy manifest lists no files: only its archive is counted.
    /// A fallback from differential to whole is checked again then.
    func spaceNeeded(_ route: Route, _ c: Candidate, _ state: StoreState) throws -> UInt64 {
        switch route {
        case let .differential(plan):
            var total: UInt64 = 0
            for (f, origin) in plan.files {
                switch origin {
                case .installed, .fetched: break
                case .archive, .bundle: total += f.size + 4096
                }
            }
            for f in plan.chunked {
                total += f.file.size + 4096
                // Chunks fetched are kept until the last file taking them is rebuilt (a linked
                // chunk compressed, then decoded): counted whole, an upper bound.
                total += f.chunks.reduce(UInt64(0)) { sum, c in
                    switch c.1 {
                    case .local: sum
                    case .fetched, .archive: sum + UInt64(c.0.size) + 4096
                    case .linked: sum + UInt64(c.0.size) + UInt64(c.0.compressedSize) + 8192
                    }
                }
            }
            return total
        case .wholeArchive:
            let linkable = installedFiles(state)
            var total = c.manifest.files.reduce(UInt64(0)) { sum, f in
                linkable[f] != nil ? sum : sum + f.size + 4096
            }
            let d = try download(for: c)
            if let size = c.manifest.archiveSize { total += size - min(size, d.resumableBytes()) }
            return total
        }
    }

    // MARK: Activate

    /// Moves the staged release into place and switches the state to it (one atomic rename).
    func activate(_ c: Candidate, state: inout StoreState, inPlace: Bool = false) throws {
        progress.report(Progress(phase: .activate))
        if !inPlace { try store.moveStagingIntoPlace(c.releaseID, state: state) }

        let ref = c.ref
        let legacyDigest = c.manifest.kind == .legacy ? c.manifest.archiveDigest : nil
        let apply = config.apply, keep = config.keepVersions
        // Applied to the state as it is now: opens, mark_good or a rollback may have changed it
        // while this update ran.
        var leaving: Set<String> = []
        (_, state) = try store.modifyState { s in
            let wasLive = s.liveReleaseIDs
            defer { leaving = wasLive.subtracting(s.liveReleaseIDs) }
            switch apply {
            case .immediate:
                if let old = s.active { s.kept.insert(old, at: 0) }
                s.active = ref
                s.activeLegacyDigest = legacyDigest
                s.launches = 0  // activation restarts the launch count; this session does not count
            case .nextOpen:
                s.pending = ref
                s.pendingLegacyDigest = legacyDigest
            }
            s.kept = Array(s.kept.filter { $0.id != ref.id }.prefix(keep))
            s.highestInstalled = max(s.highestInstalled, c.version)
            if !inPlace { s.groups.local[ref.id] = c.installedGroups.isEmpty ? nil : c.installedGroups.sorted() }
        }
        do {
            // A release this activation took out of the state becomes the tree the next update
            // builds on (`SpareTree`). Not one rolled back from or lost, which left the state
            // before; not for a legacy release, whose manifest does not list its files.
            if !inPlace, !c.manifest.isLegacy {
                store.makeSpare(toward: c.releaseID, ReleaseRecord(c, files: c.allFiles), leaving: Array(leaving), cancel: cancel, log: log)
            }
            let leased = try store.collectGarbage(state)
            // Every partial download and fetched file is now superseded (one updater at a time),
            // but what group fetches of releases still on disk (named, or served) keep.
            store.discardDownloads(keepingGroupsOf: state.liveReleaseIDs.union(leased))
            store.collectGroups(state)
            // The index roots of the releases the plan read, and this one's: no record read again.
            let known = (installedCache?.read.records ?? [:]).mapValues(\.indexRoots).merging([c.releaseID: ReleaseRecord(c, files: []).indexRoots]) { _, new in new }
            store.pruneIndexPages(keepingReleases: state.liveReleaseIDs.union(leased), known: known)
            ChunkScan.prune(store)
        } catch let e as AssetPatchError {
            store.discardDownloads(keepingGroupsOf: state.liveReleaseIDs)
            log(.warning, "cleaning up old releases: \(e.message)")
        }
        progress.report(Progress(phase: .activate), final: true)
    }
}
