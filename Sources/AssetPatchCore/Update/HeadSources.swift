/// The head when the repository has mirrors (`Sources`).
///
/// Asked for from the primary first; when it fails, or is silent for `hedge_ms`, from the next
/// source too, and so on. Once a head has arrived, the sources still under way get the hedge's
/// time more (a primary slower than a mirror still counts). A head counts when it decodes,
/// verifies and is one this client takes (its package and channel, not expired); a source whose
/// answer is anything else is demoted, and its error is what the check reports when no source
/// has a head to take. The primary's head is taken when it has one.
///
/// Freshness: a mirror may be behind. When the head came from a mirror, or the one found is
/// older than what this client accepted before, every source not asked yet is asked at once
/// and the newest head wins; sources behind it are demoted for this update (they may not have
/// its archive). A client does not report `OLDER`, or install a release older than the newest,
/// while a source that answers serves the newer head.
extension ManifestJudge {
    /// One head as a source served it.
    struct ServedHead {
        var source: Int
        var bytes: [UInt8]
        var finalURL: String
        /// Its channel, once decoded (`acceptable`).
        var channel = Channel.defaultName
    }

    /// One round of asking: the heads that arrived and this client takes (with their order;
    /// nil for a legacy manifest), the sources asked, and the failures (a refused head among
    /// them).
    private struct Round {
        var heads: [(head: ServedHead, order: ManifestOrder?)] = []
        var asked = Set<Int>()
        var errors: [Int: any Error] = [:]
    }

    func fetchHead(_ sources: Sources, _ state: StoreState) throws -> (bytes: [UInt8], finalURL: String) {
        sources.revive()
        if !config.verifies {
            log(.warning, "mirrors without public_keys or key_document: every source is trusted as the primary is (any of them can serve any release)")
        }
        var asked = Set<Int>()
        var silent = Set<Int>()
        var errors: [Int: any Error] = [:]
        var taken: [(head: ServedHead, order: ManifestOrder?)] = []
        func judge(_ round: Round) {
            asked.formUnion(round.asked)
            errors.merge(round.errors) { a, _ in a }
            taken += round.heads
            // Asked, and neither a head nor an error by the round's end: silent.
            for i in round.asked where !round.heads.contains(where: { $0.head.source == i }) && round.errors[i] == nil {
                sources.demote(i, "sent no head in time")
                silent.insert(i)
            }
        }
        // First round: in order, hedged, until a head this client takes arrives or none is left.
        while taken.isEmpty {
            let order = sources.usable().filter { !asked.contains($0) }
            if order.isEmpty {
                // The primary's error says the most (an ERR_MANIFEST, a 404), else the first.
                let error = errors[0] ?? errors.sorted { $0.key < $1.key }.first?.value
                throw error ?? AssetPatchError(.network, "no source answered")
            }
            judge(try ask(sources, order, all: false, state))
        }
        func pick() -> (head: ServedHead, order: ManifestOrder?) {
            if let p = taken.first(where: { $0.head.source == 0 }) { return p }
            return taken.reduce(taken[0]) { best, a in
                if let o = a.order, let b = best.order, o > b { return a }
                return best
            }
        }
        var best = pick()
        let mark = state.downgradeMark(verifying: config.verifies, channel: best.head.channel)
        let stale = best.order.map { $0 < mark } ?? false
        // Not asked yet; and when what was found is stale, also those only too slow to answer.
        let rest = (0..<sources.count).filter { (!asked.contains($0) && sources.isUsable($0)) || (stale && silent.contains($0)) }
        if (best.head.source != 0 || stale) && !rest.isEmpty {
            if stale { log(.info, "\(URLs.redacted(best.head.finalURL)): older than a head accepted before; asking the other sources") }
            let again = silent
            let round = try ask(sources, rest, all: true, state)
            // A source silent before that answers now takes work again.
            for h in round.heads where again.contains(h.head.source) { sources.restore(h.head.source) }
            judge(round)
            best = taken.reduce(best) { b, a in
                if let o = a.order, let bo = b.order, o > bo { return a }
                return b
            }
        }
        // A source behind the newest serves none of this update's bytes: it may not have them.
        for a in taken {
            if let o = a.order, let b = best.order, o < b {
                sources.demote(a.head.source, "serves the head of \(o), older than \(b) on another source")
            }
        }
        sources.servedHead(best.head.source, finalURL: best.head.finalURL, "served the head")
        if best.head.source != 0 { log(.info, "head from source \(sources.label(best.head.source))") }
        return (best.head.bytes, best.head.finalURL)
    }

    /// The head's order once decoded and verified as the check will, and judged a head this
    /// client takes (package, channel, expiry); nil for a legacy manifest. Throws what the
    /// check would.
    private func acceptable(_ h: inout ServedHead, _ state: StoreState) throws -> ManifestOrder? {
        let source = URLs.redacted(h.finalURL)
        let m = try Manifest.decode(h.bytes, source: source, verifies: config.verifies) { ref in
            try self.signingKeys(for: ref, manifestURL: h.finalURL).0
        }
        if m.isLegacy { return nil }
        h.channel = m.channelName
        let verifying = config.verifies
        if let expected = state.expectedPackage(verifying: verifying), expected.name != (m.package ?? "default") {
            throw AssetPatchError(.manifest, "\(source): package \"\(m.package ?? "default")\" is not this client's package \"\(expected.name)\"")
        }
        let want = config.channel ?? state.expectedChannel(verifying: verifying, verifiedBefore: verifying ? store.verifiedBefore(state) : [:])?.name
        if let want, want != m.channelName {
            throw AssetPatchError(.manifest, "\(source): a manifest of channel \"\(m.channelName)\"; this client follows channel \"\(want)\"")
        }
        if let expires = m.expires, expires <= unixTime() {
            throw AssetPatchError(.expired, "\(source): version \(m.version) expired at \(RFC3339.format(expires))")
        }
        return m.order
    }

    /// Asks `order` for the head. `all`: every one at once. Otherwise the first, and the next
    /// when one fails or is silent for the hedge, and so on. Either way the round ends the
    /// hedge's time after the first head arrived (sources still silent then are left behind),
    /// or when every source asked has answered or failed.
    private func ask(_ sources: Sources, _ order: [Int], all: Bool, _ state: StoreState) throws -> Round {
        var round = Round()
        if case .file = sources.head(order[0]) {
            // Local files (every source is one when the primary is): read in order.
            for i in order {
                guard case let .file(path, url) = sources.head(i) else { continue }
                round.asked.insert(i)
                do {
                    var h = ServedHead(source: i, bytes: try FS.readFile(path, limit: config.maxManifestBytes, limitStatus: .manifest), finalURL: url)
                    let order = try acceptable(&h, state)
                    round.heads.append((h, order))
                    sources.delivered(i, bytes: 0, "served the head")
                    if !all { break }
                } catch {
                    sources.demote(i, SourceSpread.describe(error))
                    round.errors[i] = error
                }
            }
            return round
        }
        let cache = ManifestCache.load(from: store, url: sources.head(0).url)
        var queue = order[...]
        let grace = max(sources.hedgeMs, 200)
        let began = monotonicMillis()
        var firstHead: UInt64?
        // Nothing heard from a source for this long ends its part in a round that asks all.
        let patience = max(4 * grace, 2_000)
        func next() -> HTTPClient.Pending? {
            guard firstHead == nil, let j = queue.popFirst() else { return nil }
            return pending(j)
        }
        func pending(_ i: Int) -> HTTPClient.Pending {
            let url = sources.head(i).url
            let what = "GET \(URLs.redacted(url))"
            let conditions = i == 0 ? cache?.conditionalHeaders ?? [] : []
            let limit = config.maxManifestBytes
            var body: [UInt8] = []
            var transfer: Transfer?
            round.asked.insert(i)
            let sourced = HTTPClient.Sourced(
                recover: { error, _, _ in
                    if let e = error as? AssetPatchError, e.status == .cancelled || e.released { throw e }
                    sources.demote(i, SourceSpread.describe(error))
                    round.errors[i] = error
                    return next()
                },
                hedge: all || sources.hedgeMs == 0 ? nil : { next() },
                hedgeMs: sources.hedgeMs, race: HTTPClient.Race(), left: {},
                expired: {
                    let now = monotonicMillis()
                    if let f = firstHead { return now - f >= grace }
                    return all && now - began >= patience && transfer.map { $0.ctx.receivedBytes == 0 } ?? true
                })
            return HTTPClient.Pending(make: {
                let t = try Transfer("GET", url, settings: http.settings, extraHeaders: conditions, codings: .decoded, onHead: { head in
                    guard head.status == 200 || (!conditions.isEmpty && head.status == 304) else { throw HTTPClient.statusError(head, what) }
                }, sink: { chunk in
                    if body.count + chunk.count > limit {
                        throw AssetPatchError(.manifest, "\(what): response larger than the limit of \(limit) bytes")
                    }
                    body.append(contentsOf: chunk)
                }, onEnd: {
                    guard let t = transfer else { return }
                    let head = t.ctx.head
                    var h: ServedHead
                    if head.status == 304 {
                        guard let kept = cache?.match(head) else {
                            // Which kept copy it means can't be told: the next attempt asks plainly.
                            if !readOnly { ManifestCache.drop(from: store) }
                            throw AssetPatchError(.http, "\(what): HTTP 304 without an ETag naming a kept copy", transient: true)
                        }
                        h = ServedHead(source: i, bytes: kept.bytes, finalURL: kept.finalURL)
                    } else {
                        h = ServedHead(source: i, bytes: body, finalURL: head.effectiveURL)
                    }
                    sources.delivered(i, bytes: UInt64(body.count), "served the head (HTTP \(head.status))")
                    // Judged as it arrives: a head this client refuses is that source's failure
                    // (the next is asked), and does not end the others' time to answer.
                    let order = try acceptable(&h, state)
                    round.heads.append((h, order))
                    if i == 0 && head.status == 200 { keepForRevalidation(url: url, head, body, cache: cache) }
                    firstHead = firstHead ?? monotonicMillis()
                })
                transfer = t
                sources.started(i)
                return t
            }, continuation: nil, sourced: sourced)
        }
        var started = false
        try http.runSourced(capacity: { all ? order.count : 16 }, progress: {}) {
            if all { return queue.popFirst().map(pending) }
            if started { return nil }  // the next ones come from a failure or a hedge
            started = true
            return next()
        }
        return round
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
