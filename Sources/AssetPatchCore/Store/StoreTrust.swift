/// What a client took from manifests, kept in the state: the package and channel pins, the
/// downgrade marks, and which keys vouched for each mark and installed release, judged again
/// whenever the keys in force change.
extension StoreState {
    /// The package a manifest must name, or nil when nothing constrains it yet.
    func expectedPackage(verifying: Bool) -> PackagePin? {
        guard let pin, pin.counts(verifying: verifying) else { return nil }
        return pin
    }

    /// The channel a manifest must name, or nil when nothing constrains it yet. A state written
    /// before 0.5 pinned none: the channel of the release it serves is in force.
    func expectedChannel(verifying: Bool) -> ChannelPin? {
        if let channelPin { return channelPin.counts(verifying: verifying) ? channelPin : nil }
        guard let a = active, activeLegacyDigest == nil, !verifying || a.verified == true else { return nil }
        return ChannelPin(name: a.channelName, source: a.verified == true ? .verifiedManifest : .manifest)
    }

    /// The downgrade mark in force for a channel: with keys set, only manifests accepted with a
    /// verified signature count (an unsigned manifest of version 2^62, accepted before the app
    /// set keys, must not lock out the genuine releases).
    func downgradeMark(verifying: Bool, channel: String = Channel.defaultName) -> ManifestOrder {
        guard let mark = channelMarks[channel] else { return .zero }
        return verifying ? mark.highestVerified ?? .zero : mark.highest
    }

    /// The highest mark over every channel: what `accepted_version` reports when no manifest
    /// says which channel is meant.
    func downgradeMarkAnyChannel(verifying: Bool) -> Int64 {
        verifying ? highestVerifiedVersion ?? 0 : highestVersion
    }

    /// Accepting a format-1 or format-2 manifest: it pins its package and channel when nothing
    /// did (a verified manifest also replaces an unverified pin; a channel the host names
    /// replaces any), and raises the channel's marks (`note`).
    mutating func accept(package: String, order: ManifestOrder, verified: Bool, signers: [[UInt8]], channel: String,
                         channelByHost: Bool) {
        if pin == nil || (verified && pin?.source == .manifest) {
            pin = PackagePin(name: package, source: verified ? .verifiedManifest : .manifest)
        }
        if channelByHost {
            channelPin = ChannelPin(name: channel, source: .option)
        } else if channelPin == nil || (verified && channelPin?.source == .manifest) {
            channelPin = ChannelPin(name: channel, source: verified ? .verifiedManifest : .manifest)
        }
        note(order: order, verified: verified, signers: signers, channel: channel)
    }

    /// A manifest seen, valid for this client, whatever it offers (also one this client is
    /// outside the rollout of): the channel's marks rise to it, so a copy signed before it (a
    /// copy signed before a halt) is older from now on.
    mutating func note(order: ManifestOrder, verified: Bool, signers: [[UInt8]], channel: String) {
        highestVersion = max(highestVersion, order.version)
        var mark = channelMarks[channel] ?? ChannelMark()
        mark.highest = max(mark.highest, order)
        if verified {
            highestVerifiedVersion = max(highestVerifiedVersion ?? 0, order.version)
            if order >= mark.highestVerified ?? .zero {
                mark.highestVerified = order
                mark.verifiedSigners = signers
            }
        }
        channelMarks[channel] = mark
    }

    /// What another state accepted, merged into this one (the state as it is now, under the
    /// lock): pins it made, and marks, each rising to the higher of the two.
    mutating func merge(acceptance accepted: StoreState) {
        if let p = accepted.pin, pin == nil || (pin?.source == .manifest && p.source == .verifiedManifest) { pin = p }
        if let c = accepted.channelPin, c != channelPin,
           c.source == .option || channelPin == nil || (channelPin?.source == .manifest && c.source == .verifiedManifest) {
            channelPin = c
        }
        if legacySigning == nil { legacySigning = accepted.legacySigning }
        highestVersion = max(highestVersion, accepted.highestVersion)
        highestVerifiedVersion = max(highestVerifiedVersion ?? 0, accepted.highestVerifiedVersion ?? 0)
        for (name, mark) in accepted.channelMarks {
            var merged = channelMarks[name] ?? ChannelMark()
            merged.highest = max(merged.highest, mark.highest)
            if let v = mark.highestVerified, v >= merged.highestVerified ?? .zero {
                merged.highestVerified = v
                merged.verifiedSigners = mark.verifiedSigners
            }
            channelMarks[name] = merged
        }
    }

    /// The host names its package (`source` .option or .bundle). A different package pinned
    /// before — by a manifest, or by a weaker host source — gives way: the marks belonged to
    /// it and are dropped, and so are its installed releases (the bundle is served until an
    /// update installs a release of the named package). A bundle marker never overrides the
    /// option. Returns the message for the log when something was dropped.
    mutating func pin(_ name: String, by source: PackagePin.Source, now: Int64) -> String? {
        if let pin {
            if pin.name == name {
                if source == .option || pin.source != .option { self.pin = PackagePin(name: name, source: source) }
                return nil
            }
            if source == .bundle && pin.source == .option { return nil }
        }
        let before = pin
        pin = PackagePin(name: name, source: source)
        guard let before else { return nil }
        highestVersion = 0
        highestVerifiedVersion = 0
        channelMarks = [:]
        channelPin = nil
        bad = []
        let reason = "the \(source == .option ? "package option" : "bundle marker") names package \"\(name)\", not \"\(before.name)\" as pinned before"
        var message = supersede(keeping: { _ in false }, reason: reason, now: now)
        if message == nil { message = "package \"\(name)\" pinned instead of \"\(before.name)\": \(reason)" }
        return message
    }
}

/// A manifest that the keys in force vouch for now: it vouches again for an installed release
/// that is the same release (same id, same content), whatever keys signed it before.
package struct Vouch: Sendable, Equatable {
    package var releaseID: String
    package var content: String
    package var signers: [[UInt8]]
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

extension StoreState {
    /// Judges what was accepted by the signing keys in force now (TUF drops trusted metadata
    /// once the keys that signed it are rotated out). A release or mark vouched for only by keys
    /// these no longer count (a retired key, a raised threshold) stops counting: the release is
    /// no longer served (the newest kept release still vouched for is, or the bundle), and the
    /// channel's mark falls back to the newest such release, so the publisher's recovery release
    /// installs. Releases never verified stop being served too (a verifying client). `vouch`: a
    /// manifest accepted now, which vouches for the same release installed. `verifiedBefore`:
    /// what the release records say of refs written before 0.4. Returns the message for the log
    /// when something stopped counting.
    mutating func judge(under keys: KeySet, vouch: Vouch?, verifiedBefore: [String: Bool], now: Int64) -> String? {
        if legacySigning == nil { legacySigning = keys }
        let legacy = legacySigning!
        func vouched(_ signers: [[UInt8]]?) -> Bool {
            signers.map { keys.isMet(bySigners: $0) } ?? keys.isMet(byAnyThresholdOf: legacy)
        }
        func renew(_ r: ReleaseRef?) -> ReleaseRef? {
            guard var r, let vouch, r.id == vouch.releaseID, r.content == vouch.content, r.verified == true else { return r }
            r.signers = vouch.signers
            return r
        }
        active = renew(active)
        pending = renew(pending)
        kept = kept.map { renew($0)! }
        let message = supersede(keeping: { r in
            (r.verified ?? verifiedBefore[r.id] ?? false) && vouched(r.signers)
        }, reason: "the keys in force (\(keys.described)) do not vouch for it: installed without verification, or signed by a key since retired",
           now: now)

        var dropped: [String] = []
        for (name, var mark) in channelMarks {
            guard let order = mark.highestVerified, order.version > 0, !vouched(mark.verifiedSigners) else { continue }
            let live = ([active, pending].compactMap { $0 } + kept).filter { $0.channelName == name }
            let best = live.max { $0.version < $1.version }
            mark.highestVerified = best.map { ManifestOrder(version: $0.version) } ?? .zero
            mark.verifiedSigners = best?.signers
            channelMarks[name] = mark
            dropped.append("channel \(name): \(order) no longer counts, the mark is now \(mark.highestVerified!.version)")
        }
        if !dropped.isEmpty {
            highestVerifiedVersion = channelMarks.values.map { $0.highestVerified?.version ?? 0 }.max() ?? 0
        }
        let marks = dropped.isEmpty ? nil : "accepted manifests the keys in force do not vouch for: " + dropped.sorted().joined(separator: "; ")
        let parts = [message, marks].compactMap { $0 }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }
}

/// What a manifest's evaluation judged the state by: the signing keys in force, the release the
/// manifest vouches for, and what release records say of refs written before 0.4.
package struct Judgement: Sendable {
    package var keys: KeySet
    package var vouch: Vouch?
    package var verifiedBefore: [String: Bool]
}

extension Store {
    /// Whether each release the state names without saying (a state written before 0.4) was
    /// verified, from its record.
    func verifiedBefore(_ state: StoreState) -> [String: Bool] {
        var out: [String: Bool] = [:]
        for ref in [state.active, state.pending].compactMap({ $0 }) + state.kept where ref.verified == nil {
            out[ref.id] = (try? loadRelease(ref.id))?.signatureVerified ?? false
        }
        return out
    }
}
