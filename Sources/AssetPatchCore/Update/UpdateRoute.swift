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
            if digests.hashedCount > 0 { log(1, "hashed \(digests.hashedCount) bundle files (cached for later updates)") }
        }
        guard let delta = DifferentialPlan.make(c.manifest.files, local: onDisk(installed, fetched, bundle)) else {
            return .wholeArchive("the manifest has no per-file locations")
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
        log(1, "differential update: \(plan.fetchEntries) files in \(plan.ranges.count) ranges, \(plan.fetchBytes) of \(c.manifest.archiveSize ?? 0) archive bytes")
        let fetch = RangeFetch(source: c.archive, archiveSize: c.manifest.archiveSize ?? 0,
                               dir: store.fetchedDir(c.manifest.archiveDigest), http: http, parallel: config.parallelDownloads,
                               cancel: cancel, progress: progress)
        do {
            try store.prepareStaging(c.releaseID)
            progress.report(Progress(phase: .download, bytesDone: 0, bytesTotal: plan.fetchBytes,
                                     filesDone: 0, filesTotal: UInt64(plan.fetchEntries)))
            if c.archive.isFile { try fetch.attempt(plan) } else { try withRetries { try fetch.attempt(plan) } }
            progress.report(Progress(phase: .download, bytesDone: plan.fetchBytes, bytesTotal: plan.fetchBytes,
                                     filesDone: UInt64(plan.fetchEntries), filesTotal: UInt64(plan.fetchEntries)), final: true)
            for path in fetch.fetched.values { verifiedFetched.insert(path) }
            try cancel.check()
            return try Installer(store: store, config: config, cancel: cancel, progress: progress)
                .assemble(c, plan, fetched: fetch.fetched)
        } catch let f as DifferentialFallback {
            for path in fetch.fetched.values { verifiedFetched.insert(path) }
            store.discardStaging(c.releaseID)
            log(2, "\(f.message); downloading the whole archive instead")
            try store.requireFreeSpace(try spaceNeeded(.wholeArchive(f.message), c, store.loadState()), for: "version \(c.version)")
            return nil
        }
    }

    /// Writes what accepting a manifest changed in `accepted` (the package pin and the
    /// downgrade mark) into the current state.
    static func recordAcceptance(_ accepted: StoreState, in store: Store) throws {
        try store.modifyState { s in
            if let pin = accepted.pin, s.pin == nil || (s.pin?.source == .manifest && pin.source == .verifiedManifest) { s.pin = pin }
            s.highestVersion = max(s.highestVersion, accepted.highestVersion)
            s.highestVerifiedVersion = max(s.highestVerifiedVersion ?? 0, accepted.highestVerifiedVersion ?? 0)
        }
    }
}
