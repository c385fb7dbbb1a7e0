/// Judging what a data directory accepted by the signing keys in force: TUF drops trusted
/// metadata once the keys that signed it are rotated out, so that a fast-forward made with a
/// stolen key ends when the key is retired.

/// A manifest accepted now, under the keys in force, that this client would install: it
/// vouches again for an installed release that is the same release (same id, same content),
/// whatever keys signed it before (a channel re-signed after a rotation).
package struct Vouch: Sendable, Equatable {
    package var releaseID: String
    package var content: String
    package var signers: [[UInt8]]
}

/// What is assumed of marks and releases accepted before signers were recorded (0.4 and
/// earlier): that a threshold of these keys signed them, or nothing (they count only while
/// re-vouched).
package enum LegacyTrust: Sendable, Equatable {
    case keys(KeySet)
    case unknown
}

extension KeySet {
    /// Whether signatures by `signers` meet this set's threshold.
    func isMet(bySigners signers: [[UInt8]]) -> Bool {
        signers.reduce(into: Set<[UInt8]>()) { if keys.contains($1) { $0.insert($1) } }.count >= threshold
    }

    /// Whether any threshold of `earlier`'s keys is sure to meet this set: all that is known of
    /// a manifest accepted under `earlier` whose signers were not recorded.
    func isMet(byAnyThresholdOf earlier: KeySet) -> Bool {
        let gone = earlier.keys.filter { !keys.contains($0) }.count
        return max(0, earlier.threshold - gone) >= threshold
    }
}

extension ChannelMark {
    /// At most this many keys' own marks are kept (the lowest go first).
    static let maxSigners = 64

    /// `key` signed a verified manifest of this order.
    mutating func raise(_ key: [UInt8], to order: ManifestOrder) {
        if let have = bySigner[key], have >= order { return }
        bySigner[key] = order
        if bySigner.count > ChannelMark.maxSigners, let lowest = bySigner.min(by: { $0.value < $1.value })?.key {
            bySigner[lowest] = nil
        }
    }

    /// The highest order that a threshold of `keys` each signed a manifest at or above: what the
    /// keys in force still vouch for.
    func vouched(by keys: KeySet) -> ManifestOrder {
        let orders = keys.keys.compactMap { bySigner[$0] }.sorted(by: >)
        return orders.count >= keys.threshold ? orders[keys.threshold - 1] : .zero
    }
}

extension StoreState {
    /// Judges what was accepted by the signing keys in force now. A release or mark vouched for
    /// only by keys these no longer count (a retired key, a raised threshold) stops counting:
    /// the release is no longer served (the newest kept release still vouched for is, or the
    /// bundle), and the channel's mark falls back to the highest order the keys in force still
    /// vouch for (each key's own highest, or a release still vouched for), so the publisher's
    /// recovery release installs. Releases never verified stop being served too (a verifying
    /// client). `vouch`: a manifest accepted now (see `Vouch`). `legacy`: what to assume of
    /// what was accepted before signers were recorded, the first time it matters.
    /// `verifiedBefore`: what the release records say of refs written before 0.4. Returns the
    /// message for the log when something stopped counting.
    mutating func judge(under keys: KeySet, vouch: Vouch?, legacy: LegacyTrust, verifiedBefore: [String: Bool], now: Int64) -> String? {
        if legacyTrust == nil { legacyTrust = legacy }
        let assumed = legacyTrust!
        func vouched(_ signers: [[UInt8]]?) -> Bool {
            if let signers { return keys.isMet(bySigners: signers) }
            if case let .keys(earlier) = assumed { return keys.isMet(byAnyThresholdOf: earlier) }
            return false
        }
        func verified(_ r: ReleaseRef) -> Bool { r.verified ?? verifiedBefore[r.id] ?? false }
        func renew(_ r: ReleaseRef?) -> ReleaseRef? {
            guard var r, let vouch, r.id == vouch.releaseID, r.content == vouch.content, verified(r) else { return r }
            r.signers = vouch.signers
            r.verified = true
            return r
        }
        active = renew(active)
        pending = renew(pending)
        kept = kept.map { renew($0)! }
        let message = supersede(keeping: { verified($0) && vouched($0.signers) },
                                reason: "the keys in force (\(keys.described)) do not vouch for it: installed without verification, or signed by a key since retired",
                                now: now)

        var dropped: [String] = []
        for (name, var mark) in channelMarks {
            guard let order = mark.highestVerified, order.version > 0, !vouched(mark.verifiedSigners) else { continue }
            var fallback = mark.vouched(by: keys)
            var signers = keys.keys.filter { (mark.bySigner[$0] ?? .zero) >= fallback }
            let live = ([active, pending].compactMap { $0 } + kept).filter { $0.channelName == name }
            if let best = live.max(by: { $0.version < $1.version }), ManifestOrder(version: best.version) > fallback {
                fallback = ManifestOrder(version: best.version)
                signers = best.signers ?? []
            }
            mark.highestVerified = fallback
            mark.verifiedSigners = fallback == .zero ? nil : signers
            channelMarks[name] = mark
            dropped.append("channel \(name): \(order) no longer counts, the mark is now \(fallback)")
        }
        if !dropped.isEmpty {
            highestVerifiedVersion = channelMarks.values.map { $0.highestVerified?.version ?? 0 }.max() ?? 0
        }
        let marks = dropped.isEmpty ? nil : "accepted manifests the keys in force do not vouch for: " + dropped.sorted().joined(separator: "; ")
        let parts = [message, marks].compactMap { $0 }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }
}

/// What a manifest's evaluation judges the data directory by: the trust anchor, the key
/// document in force (followed now: `followed`, kept once the manifest is accepted), the release
/// the manifest vouches for, and what to assume of what was accepted before signers were
/// recorded.
package struct Judgement: Sendable {
    package var anchor: KeyDocument
    package var document: KeyDocument
    /// The document followed by this evaluation, newer than the one kept before it.
    package var followed: KeyDocument?
    package var vouch: Vouch?
    package var legacy: LegacyTrust
    package var verifiedBefore: [String: Bool]
}

extension Store {
    /// Whether each release the state names without saying (a state written before 0.4) was
    /// verified, from its record.
    func verifiedBefore(_ state: StoreState) -> [String: Bool] {
        var out: [String: Bool] = [:]
        for ref in [state.active, state.pending].compactMap({ $0 }) + state.kept where ref.verified == nil {
            out[ref.id] = (try? loadRelease(ref.id, listingFiles: false))?.signatureVerified ?? false
        }
        return out
    }

    /// Under the state lock: keeps the document the evaluation followed (only if it is newer
    /// than the one kept now: another process may have followed further), then judges the state
    /// by the newest document kept for the anchor (the evaluation's vouch counts only if that is
    /// the document it was made under). Returns the judgement's message and the state written.
    @discardableResult
    func commit(_ j: Judgement, acceptance: (accepted: StoreState, before: StoreState)? = nil) throws -> (String?, StoreState) {
        try modifyState { s in
            if let doc = j.followed { try keepKeyDocumentIfNewer(doc, anchor: j.anchor) }
            var keys = j.document.signing, vouch = j.vouch
            if let newest = keptKeyDocument(anchor: j.anchor), newest.version > j.document.version {
                keys = newest.signing
                vouch = nil
            }
            if let (accepted, before) = acceptance { s.merge(acceptance: accepted, before: before) }
            return s.judge(under: keys, vouch: vouch, legacy: j.legacy, verifiedBefore: j.verifiedBefore, now: unixTime())
        }
    }

    /// Writes what accepting a manifest changed in `accepted` (made from the snapshot
    /// `before`: the pins and the downgrade marks) into the current state, judging it again by
    /// the keys in force (`commit`) when the client verifies.
    func recordAcceptance(_ accepted: StoreState, before: StoreState, judgement: Judgement?) throws {
        if var j = judgement {
            j.vouch = nil  // what it vouched for was renewed when the evaluation committed it
            try commit(j, acceptance: (accepted, before))
        } else {
            try modifyState { $0.merge(acceptance: accepted, before: before) }
        }
    }
}
