import Glibc

/// Which manifest a check reads: `manifest_url`, or the head a `manifest.json` there names.
///
/// A repository's `manifest.json` lists every file; its `head.json` lists none and points at a
/// paged index with chunk lists (format.md). Hosts set long before heads existed still give
/// clients `manifest.json`, whose `head` names the head beside it. The first check that reads
/// such a manifest judges it (signature, package, channel, expiry), then reads the head it
/// names in the same check; when that head is not older than the manifest, the data directory
/// keeps it (`Store.namedHead`) and every later check reads the head alone: the same bytes as a
/// host that gives `head.json`. A kept head that fails for a reason a retry does not change
/// (gone, refused) is forgotten and the manifest read in its place; a head that fails, or is
/// older, when the manifest names it is declined for that manifest's order, and the manifest's
/// bytes already fetched are judged instead, so a repository whose head is broken costs what it
/// cost before heads, not both files on every check.
extension Updater {
    /// Fetches and judges the manifest (`ManifestJudge`), through the head `manifest_url` names
    /// when it names one. nil: nothing to do.
    func evaluate(_ state: inout StoreState, _ e: inout Evaluation) throws -> Candidate? {
        guard let given = given.manifest else { return try judge(&state, &e) }
        if let reference = store.namedHead(for: given.url), let head = follow(reference) {
            var tried = state
            do {
                let found = try judge(&tried, &e)
                state = tried
                e.namedHead = head.shown
                return found
            } catch let error as AssetPatchError where headFailed(error) {
                log(.warning, "\(error.message); reading \(given.shown), which named this head, instead")
                if !readOnly { store.forgetNamedHead() }
                e = Evaluation()
            }
        }
        follow(nil)
        let found = try judge(&state, &e, namesHead: true, declined: store.declinedHead(for: given.url))
        guard let named = e.read, let reference = named.head, let served = e.naming else { return found }
        e.naming = nil
        // The manifest names a head, and was judged up to what reading the head changes.
        func instead(_ why: String, decline: Bool) throws -> Candidate? {
            log(.warning, why)
            if decline && !readOnly { store.declineNamedHead(for: given.url, order: named.order) }
            follow(nil)
            e = Evaluation()
            return try judge(&state, &e, served: served)
        }
        guard let head = follow(reference) else {
            return try instead("\(given.shown): names head \"\(reference)\" off its origin; not read", decline: false)
        }
        var tried = state
        var headEvaluation = Evaluation()
        do {
            let found = try judge(&tried, &headEvaluation)
            guard let order = headEvaluation.read?.order, order >= named.order else {
                return try instead("\(head.shown): \(headEvaluation.read.map { "\($0.order)" } ?? "a legacy manifest"), older than \(named.order) in \(given.shown); reading the manifest",
                                   decline: true)
            }
            if !readOnly { store.keepNamedHead(reference, for: given.url) }
            log(.info, "\(given.shown) names \(head.shown): reading the head from now on")
            state = tried
            e = headEvaluation
            e.namedHead = head.shown
            return found
        } catch let error as AssetPatchError where headFailed(error) {
            return try instead("\(error.message); reading \(given.shown), which named this head, instead", decline: true)
        }
    }

    private func judge(_ state: inout StoreState, _ e: inout Evaluation, namesHead: Bool = false, declined: ManifestOrder? = nil,
                       served: (bytes: [UInt8], finalURL: String)? = nil) throws -> Candidate? {
        try ManifestJudge(store: store, config: config, context: context, readOnly: readOnly, namesHead: namesHead,
                          declined: declined, served: served).evaluate(&state, &e)
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
