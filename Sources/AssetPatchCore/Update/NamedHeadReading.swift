import Glibc

/// Which manifest a check reads: `manifest_url`, or the head a `manifest.json` there names.
///
/// A repository's `manifest.json` lists every file; its `head.json` lists none and points at a
/// paged index with chunk lists (format.md). Hosts set long before heads existed still give
/// clients `manifest.json`, whose `head` names the head beside it. The first check that reads
/// such a manifest judges it (signature, package, channel, expiry), then reads the head it
/// names in the same check; when that head is not older than the manifest, the data directory
/// keeps it (`Store.NamedHeadRecord`) and later checks read the head: the same bytes as a host
/// that gives `head.json`.
///
/// The head must not freeze the client where the manifest moves on (a tool that rewrites only
/// `manifest.json`, a cache that keeps `head.json` longer): when the kept head offers nothing
/// new, the manifest is watched with a HEAD request (a local one by its size and time), and
/// read again when it changed since the head last moved. A kept head that fails for what the
/// head is (gone, refused) is forgotten and the manifest read in its place; a head that fails,
/// or is older, when a manifest names it is declined for that manifest's order, and the bytes
/// already fetched are judged instead: a repository whose head is broken costs what it cost
/// before heads, not both files on every check.
extension Updater {
    /// Fetches and judges the manifest (`ManifestJudge`), through the head `manifest_url` names
    /// when it names one. nil: nothing to do.
    func evaluate(_ state: inout StoreState, _ e: inout Evaluation) throws -> Candidate? {
        guard let given = given.manifest else { return try judge(&state, &e) }
        let kept = store.namedHeadRecord(for: given.url)
        var trustChanged = false
        /// A judgement thrown away keeps what it changed of trust (`Evaluation.trustChanged`).
        func restart() {
            trustChanged = trustChanged || e.trustChanged
            e = Evaluation()
        }
        defer { e.trustChanged = e.trustChanged || trustChanged }
        if var record = kept, let reference = record.reference, let head = follow(reference) {
            var tried = state
            e.namedHead = head.shown
            do {
                let found = try judge(&tried, &e)
                let order = e.read?.order
                if found != nil || order != record.watchedHead || record.watch == nil {
                    // The head moved (or is read the first time since kept): what the manifest
                    // is now goes with it.
                    record.watch = manifestWatch(given) ?? record.watch
                    record.watchedHead = order
                    if !readOnly { store.keep(record) }
                    state = tried
                    e.namedHead = head.shown
                    return found
                }
                guard let now = manifestWatch(given), now != record.watch else {
                    state = tried
                    e.namedHead = head.shown
                    return found
                }
                log(.info, "\(given.shown) changed while \(head.shown), which it names, did not: reading the manifest")
                restart()
            } catch let error as AssetPatchError where headFailed(error) {
                log(.warning, "\(error.message); reading \(given.shown), which named this head, instead")
                if !readOnly { store.forgetNamedHead() }
                restart()
            }
        }
        follow(nil)
        let found = try judge(&state, &e, namesHead: true, declined: kept?.declined)
        guard let named = e.read, let reference = named.head, let served = e.naming else { return found }
        e.naming = nil
        // The manifest names a head, and was judged up to what reading the head changes.
        func instead(_ why: String, decline: Bool) throws -> Candidate? {
            log(.warning, why)
            if decline && !readOnly { store.keep(Store.NamedHeadRecord(manifestURL: given.url, declined: named.order)) }
            follow(nil)
            restart()
            return try judge(&state, &e, served: served)
        }
        guard let head = follow(reference) else {
            return try instead("\(given.shown): names head \"\(reference)\", not a file beside it; not read", decline: false)
        }
        var tried = state
        var headEvaluation = Evaluation()
        do {
            let found = try judge(&tried, &headEvaluation)
            guard let order = headEvaluation.read?.order, order >= named.order else {
                trustChanged = trustChanged || headEvaluation.trustChanged
                return try instead("\(head.shown): \(headEvaluation.read.map { "\($0.order)" } ?? "a legacy manifest"), older than \(named.order) in \(given.shown); reading the manifest",
                                   decline: true)
            }
            if !readOnly {
                store.keep(Store.NamedHeadRecord(manifestURL: given.url, reference: reference, watch: manifestWatch(given), watchedHead: order))
            }
            log(.info, "\(given.shown) names \(head.shown): reading the head from now on")
            state = tried
            e = headEvaluation
            e.namedHead = head.shown
            return found
        } catch let error as AssetPatchError where headFailed(error) || error.transient {
            trustChanged = trustChanged || headEvaluation.trustChanged
            // A head that may answer later is not declined: this check takes the manifest.
            return try instead("\(error.message); reading \(given.shown), which named this head, instead", decline: !error.transient)
        }
    }

    private func judge(_ state: inout StoreState, _ e: inout Evaluation, namesHead: Bool = false, declined: ManifestOrder? = nil,
                       served: (bytes: [UInt8], finalURL: String)? = nil) throws -> Candidate? {
        try ManifestJudge(store: store, config: config, context: context, readOnly: readOnly, namesHead: namesHead,
                          declined: declined, served: served).evaluate(&state, &e)
    }

    /// What identifies `manifest_url`'s manifest now without reading it: a HEAD's ETag and
    /// Last-Modified, or a local file's size, modification time and inode. nil when it can't be
    /// told (no validators, a failed request): the head is then trusted as it is.
    private func manifestWatch(_ location: Location) -> String? {
        switch location {
        case let .file(path, _):
            var st = stat()
            guard stat(path, &st) == 0 else { return nil }
            return "file \(st.st_size) \(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec) \(st.st_ino)"
        case let .http(url):
            guard let h = try? http.head(url), h.status == 200, h.header("ETag") != nil || h.header("Last-Modified") != nil else {
                return nil
            }
            return "http \(h.header("ETag") ?? "")\t\(h.header("Last-Modified") ?? "")"
        }
    }

    /// A named head that failed for what the head is (gone, answered with an error page,
    /// malformed, unsigned, of another package or channel, expired) leaves the manifest to read.
    /// What a retry could change (the network, a busy server) and what the manifest's release
    /// would fail alike (the app's version, the release's size) fail the check as before.
    private func headFailed(_ error: AssetPatchError) -> Bool {
        if error.transient { return false }
        switch error.status {
        case .http, .manifest, .signature, .expired, .notFound: return true
        case .io: return error.errno == ENOENT
        default: return false
        }
    }
}
