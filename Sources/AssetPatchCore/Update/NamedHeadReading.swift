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
/// new, the manifest's first KiB is asked for (conditionally: a 304 when it is the copy looked
/// at before) and the version it offers read from it, unverified; when that is newer than the
/// head's, the manifest is read and judged in full. A kept head that fails for what the
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
                guard found == nil, let order = e.read?.order, let offered = manifestVersion(given, &record), offered > order.version else {
                    state = tried
                    e.namedHead = head.shown  // the judge started `e` afresh
                    return found
                }
                log(.info, "\(given.shown) offers version \(offered), \(head.shown), which it names, \(order): reading the manifest")
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
        // Read before the head's fetch keeps that URL's copies in its place.
        let watch = copyRead(given, served.bytes)
        // The manifest names a head, and was judged up to what reading the head changes.
        func instead(_ why: String, decline: Bool) throws -> Candidate? {
            log(.warning, why)
            if decline && !readOnly { store.keep(Store.NamedHeadRecord(manifestURL: given.url, declined: named.order)) }
            follow(nil)
            restart()
            return try judge(&state, &e, served: served)
        }
        // The judge stops only for a reference it can follow (`NamedHead.location`).
        guard let head = follow(reference) else { return try instead("\(given.shown): head \"\(reference)\" can't be read", decline: false) }
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
                store.keep(Store.NamedHeadRecord(manifestURL: given.url, reference: reference, watch: watch,
                                                 hinted: watch == nil ? nil : named.order.version))
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

    static let hintBytes = 1024

    /// Ends a read that has the bytes it wanted.
    private struct EnoughRead: Error {}

    /// The version `manifest_url`'s manifest offers, from its first KiB: an unverified hint,
    /// which only decides whether the manifest is read and judged in full. A copy looked at
    /// before (a 304; a local file of the same size, time and inode) offers what `record` kept;
    /// a new one's is kept. nil: it can't be told.
    private func manifestVersion(_ location: Location, _ record: inout Store.NamedHeadRecord) -> Int64? {
        guard let (version, watch) = manifestHint(location, since: record.watch) else { return record.hinted }
        (record.watch, record.hinted) = (watch, version)
        if !readOnly { store.keep(record) }
        return version
    }

    /// The version a copy of the manifest other than `watch` names, and what identifies that
    /// copy (nil: nothing does); nil when it is that copy, or can't be told (a failed request, a
    /// manifest that does not start as publish writes it).
    private func manifestHint(_ location: Location, since watch: String?) -> (version: Int64, watch: String?)? {
        switch location {
        case let .file(path, _):
            var st = stat()
            guard stat(path, &st) == 0 else { return nil }
            let id = "file \(st.st_size) \(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec) \(st.st_ino)"
            guard id != watch, let file = try? File.openRead(path) else { return nil }
            var prefix = [UInt8](repeating: 0, count: Updater.hintBytes)
            let n = (try? prefix.withUnsafeMutableBytes { try file.pread(into: $0, at: 0) }) ?? 0
            return ManifestHints.version(Array(prefix.prefix(n))).map { ($0, id) }
        case let .http(url):
            var conditions = ["Range: bytes=0-\(Updater.hintBytes - 1)"]
            if let watch, watch.hasPrefix("etag ") { conditions.append("If-None-Match: " + watch.dropFirst(5)) }
            var prefix: [UInt8] = []
            var answer: ResponseHead?
            do {
                answer = try http.get(url, extraHeaders: conditions, onHead: { answer = $0 }, sink: { chunk in
                    prefix.append(contentsOf: chunk.prefix(Updater.hintBytes - prefix.count))
                    // A server that ignores the range: enough is read.
                    if prefix.count >= Updater.hintBytes { throw EnoughRead() }
                })
            } catch is EnoughRead {
            } catch {
                return nil
            }
            guard let answer, answer.status == 206 || answer.status == 200 else { return nil }
            // A racy ETag (nginx's is time and size: a rewrite of the same size within the
            // second keeps it) would make the next look a 304 for another copy: not kept.
            return ManifestHints.version(prefix).map { ($0, Validators.reusable(answer)?.etag.map { "etag " + $0 }) }
        }
    }

    /// What identifies the copy of the manifest just read in full (its ETag, as kept for a 304
    /// with validators that are not racy), so that the next check's look at its first KiB is a
    /// 304 too: the copy is the one whose version `hinted` keeps. nil: none is kept.
    private func copyRead(_ location: Location, _ bytes: [UInt8]) -> String? {
        guard case let .http(url) = location, let cache = ManifestCache.load(from: store, url: url),
              let etag = cache.entries.first(where: { $0.bytes == bytes })?.validators.etag else { return nil }
        return "etag " + etag
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
