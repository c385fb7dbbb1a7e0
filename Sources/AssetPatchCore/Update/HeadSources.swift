/// The head when the repository has mirrors (`Sources`): asked for from the primary first;
/// when it fails or stays silent for `hedge_ms`, from the next source too, and so on, the first
/// head that decodes and verifies taking the check. A source whose answer is not a head this
/// client takes (an error, HTML, a bad signature) is demoted and the next one asked.
///
/// Freshness: a mirror may be behind. When the head came from a mirror (the primary failed),
/// or the one found is older than what this client accepted before, every other usable source
/// is asked at once (heads are under a kilobyte; one silent for `hedge_ms` is left behind) and
/// the newest head that verifies wins: a client does not report `OLDER`, or install a release
/// older than the newest, while a source it can reach serves the newer head.
extension ManifestJudge {
    /// One head as a source served it.
    struct ServedHead {
        var source: Int
        var bytes: [UInt8]
        var finalURL: String
    }

    func fetchHead(_ sources: Sources, _ state: StoreState) throws -> (bytes: [UInt8], finalURL: String) {
        var asked = Set<Int>()
        var lastError: (any Error)?
        var found: (head: ServedHead, order: ManifestOrder?)?
        while found == nil {
            let order = sources.usable().filter { !asked.contains($0) }
            guard !order.isEmpty else { throw lastError ?? AssetPatchError(.network, "no source answered") }
            let (heads, failed) = try ask(sources, order, all: false)
            asked.formUnion(failed)
            lastError = failed.isEmpty ? lastError : AssetPatchError(.network, "every source failed; the last: \(sources.snapshot[failed.max()!].last)")
            for h in heads {
                asked.insert(h.source)
                do { found = (h, try decodedOrder(h)) } catch {
                    sources.demote(h.source, SourceSpread.describe(error))
                    lastError = error
                }
            }
        }
        var best = found!
        let fromMirror = best.head.source != 0
        let stale = best.order.map { $0 < state.downgradeMark(verifying: config.verifies, channel: channel(of: best.head)) } ?? false
        let rest = sources.usable().filter { !asked.contains($0) }
        if (fromMirror || stale) && !rest.isEmpty {
            if stale { log(.info, "\(URLs.redacted(best.head.finalURL)): older than a head accepted before; asking the other sources") }
            var answers = [best]
            for h in try ask(sources, rest, all: true).heads {
                do { answers.append((h, try decodedOrder(h))) } catch {
                    sources.demote(h.source, SourceSpread.describe(error))
                }
            }
            for a in answers {
                if let o = a.order, let b = best.order, o > b { best = a }
            }
            // A source behind the newest serves none of this update's bytes: it may not have them.
            for a in answers {
                if let o = a.order, let b = best.order, o < b {
                    sources.demote(a.head.source, "serves the head of \(o), older than \(b) on another source")
                }
            }
        }
        let winner = best.head
        sources.servedHead(winner.source, finalURL: winner.finalURL, "served the head")
        if winner.source != 0 { log(.info, "head from source \(sources.label(winner.source))") }
        return (winner.bytes, winner.finalURL)
    }

    private func channel(of h: ServedHead) -> String {
        (try? Manifest.decode(h.bytes, source: "", verifies: false) { _ in nil })?.channelName ?? Channel.defaultName
    }

    /// The head's order once decoded and verified as the check will; nil for a legacy manifest.
    private func decodedOrder(_ h: ServedHead) throws -> ManifestOrder? {
        let m = try Manifest.decode(h.bytes, source: URLs.redacted(h.finalURL), verifies: config.verifies) { ref in
            try self.signingKeys(for: ref, manifestURL: h.finalURL).0
        }
        return m.isLegacy ? nil : m.order
    }

    /// Asks `order` for the head: `all`, every one at once, a source silent for the hedge left
    /// behind; otherwise the first, the next when it fails or is silent for the hedge, and so
    /// on, until one answers. Returns the heads received and the sources that failed.
    private func ask(_ sources: Sources, _ order: [Int], all: Bool) throws -> (heads: [ServedHead], failed: [Int]) {
        var heads: [ServedHead] = []
        var failed: [Int] = []
        var remote: [Int] = []
        // Local files first: read at once, no connection to wait for.
        for i in order {
            switch sources.head(i) {
            case let .file(path, url):
                do {
                    heads.append(ServedHead(source: i, bytes: try FS.readFile(path, limit: config.maxManifestBytes, limitStatus: .manifest), finalURL: url))
                    if !all { return (heads, failed) }
                } catch {
                    sources.demote(i, SourceSpread.describe(error))
                    failed.append(i)
                }
            case .http: remote.append(i)
            }
        }
        guard !remote.isEmpty else { return (heads, failed) }
        let cache = ManifestCache.load(from: store, url: sources.head(0).url)
        var queue = remote[...]
        let settings = self.http.settings
        let hedgeMs = max(sources.hedgeMs, all ? 1000 : 0)
        func pending(_ i: Int, race: HTTPClient.Race) -> HTTPClient.Pending {
            let url = sources.head(i).url
            let what = "GET \(URLs.redacted(url))"
            let conditions = i == 0 ? cache?.conditionalHeaders ?? [] : []
            var body: [UInt8] = []
            var transfer: Transfer?
            let limit = config.maxManifestBytes
            let next: () -> HTTPClient.Pending? = {
                guard !all, let j = queue.popFirst() else { return nil }
                return pending(j, race: race)
            }
            let sourced = HTTPClient.Sourced(
                recover: { error, _, covered in
                    if let e = error as? AssetPatchError, e.status == .cancelled { throw e }
                    sources.demote(i, SourceSpread.describe(error))
                    failed.append(i)
                    return covered ? nil : next()
                },
                hedge: sources.hedgeMs == 0 && !all ? nil : {
                    sources.demote(i, "sent nothing for \(hedgeMs) ms")
                    failed.append(i)
                    return next()
                },
                hedgeMs: hedgeMs, race: all ? HTTPClient.Race() : race, left: {}, leaveWhenSilent: all)
            return HTTPClient.Pending(make: {
                let t = try Transfer("GET", url, settings: settings, extraHeaders: conditions, codings: .decoded, onHead: { head in
                    guard head.status == 200 || (!conditions.isEmpty && head.status == 304) else { throw HTTPClient.statusError(head, what) }
                }, sink: { chunk in
                    if body.count + chunk.count > limit {
                        throw AssetPatchError(.manifest, "\(what): response larger than the limit of \(limit) bytes")
                    }
                    body.append(contentsOf: chunk)
                }, onEnd: {
                    guard let t = transfer else { return }
                    let head = t.ctx.head
                    if head.status == 304 {
                        guard let kept = cache?.match(head) else {
                            throw AssetPatchError(.http, "\(what): HTTP 304 without an ETag naming a kept copy")
                        }
                        heads.append(ServedHead(source: i, bytes: kept.bytes, finalURL: kept.finalURL))
                    } else {
                        if i == 0 { keepForRevalidation(url: url, head, body, cache: cache) }
                        heads.append(ServedHead(source: i, bytes: body, finalURL: head.effectiveURL))
                    }
                    sources.delivered(i, bytes: UInt64(body.count), "served the head (HTTP \(head.status))")
                })
                transfer = t
                sources.started(i)
                return t
            }, continuation: nil, sourced: sourced)
        }
        var started = false
        try http.runSourced(capacity: { all ? order.count : 16 }, progress: {}) {
            if !all && started { return nil }  // the next ones come from a failure or a hedge
            started = true
            return queue.popFirst().map { pending($0, race: HTTPClient.Race()) }
        }
        return (heads, failed)
    }

    /// Keeps a 200 from the primary for conditional requests (see `fetchManifest`).
    func keepForRevalidation(url: String, _ head: ResponseHead, _ body: [UInt8], cache: ManifestCache?) {
        if readOnly { return }
        if let validators = Validators.reusable(head) {
            var updated = cache ?? ManifestCache(url: url, entries: [])
            updated.insert(ManifestCache.Entry(finalURL: head.effectiveURL, validators: validators, bytes: body))
            updated.save(to: store)
        }
    }
}
