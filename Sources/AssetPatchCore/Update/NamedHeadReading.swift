import Glibc

/// Which manifest a check reads: `manifest_url`, or the head a `manifest.json` there names.
///
/// A repository's `manifest.json` lists every file; its `head.json` lists none and points at a
/// paged index with chunk lists (format.md). Hosts set long before heads existed still give
/// clients `manifest.json`, whose `head` names the head beside it. The first check that reads
/// such a manifest judges it (signature, package, channel, expiry), then reads the head it
/// names in the same check; when that head is not older than the manifest, the data directory
/// keeps it (`Store.namedHead`) and every later check reads the head alone: the same bytes as a
/// host that gives `head.json`. A head that fails for anything but a transient reason (gone,
/// refused, older than the manifest) is dropped and the manifest read in its place, so a
/// repository that stops publishing heads is followed again once its `head.json` is deleted.
extension Updater {
    /// Fetches and judges the manifest (`ManifestJudge`), through the head `manifest_url` names
    /// when it names one. nil: nothing to do.
    func evaluate(_ state: inout StoreState, _ e: inout Evaluation) throws -> Candidate? {
        guard let given = given.manifest else { return try judge(&state, &e, namesHead: false) }
        if let reference = store.namedHead(for: given.url), let head = follow(reference) {
            var tried = state
            do {
                let found = try judge(&tried, &e, namesHead: false)
                state = tried
                e.namedHead = head.shown
                return found
            } catch let error as AssetPatchError where mayReadManifest(after: error) {
                log(.warning, "\(error.message); reading \(given.shown), which named this head, instead")
                if !readOnly { store.forgetNamedHead() }
            }
        }
        follow(nil)
        let found = try judge(&state, &e, namesHead: true)
        guard let named = e.read, let reference = named.head else { return found }
        // The manifest names a head, and was judged up to what reading the head changes.
        guard let head = follow(reference) else {
            log(.warning, "\(given.shown): names head \"\(reference)\" off its origin; not read")
            follow(nil)
            return try judge(&state, &e, namesHead: false)
        }
        var tried = state
        var headEvaluation = Evaluation()
        do {
            let found = try judge(&tried, &headEvaluation, namesHead: false)
            if let order = headEvaluation.read?.order, order >= named.order {
                if !readOnly { store.keepNamedHead(reference, for: given.url) }
                log(.info, "\(given.shown) names \(head.shown): reading the head from now on")
                state = tried
                e = headEvaluation
                e.namedHead = head.shown
                return found
            }
            log(.warning, "\(head.shown): \(headEvaluation.read.map { "\($0.order)" } ?? "a legacy manifest"), older than \(named.order) in \(given.shown); reading the manifest")
        } catch let error as AssetPatchError where mayReadManifest(after: error) {
            log(.warning, "\(error.message); reading \(given.shown), which named this head, instead")
        }
        follow(nil)
        return try judge(&state, &e, namesHead: false)
    }

    private func judge(_ state: inout StoreState, _ e: inout Evaluation, namesHead: Bool) throws -> Candidate? {
        try ManifestJudge(store: store, config: config, context: context, readOnly: readOnly, namesHead: namesHead).evaluate(&state, &e)
    }

    /// A named head that failed leaves the manifest to read, unless a retry later could bring
    /// it back (the network, a busy server) or the host stopped the check.
    private func mayReadManifest(after error: AssetPatchError) -> Bool {
        !error.transient && ![.cancelled, .network, .busy, .io, .state, .metered].contains(error.status) || error.errno == ENOENT
    }
}
