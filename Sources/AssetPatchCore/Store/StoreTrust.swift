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
    /// `verifiedBefore`: what release records say of refs written before 0.4.
    func expectedChannel(verifying: Bool, verifiedBefore: [String: Bool] = [:]) -> ChannelPin? {
        if let channelPin { return channelPin.counts(verifying: verifying) ? channelPin : nil }
        guard let a = active, activeLegacyDigest == nil else { return nil }
        let verified = a.verified ?? verifiedBefore[a.id] ?? false
        guard !verifying || verified else { return nil }
        return ChannelPin(name: a.channelName, source: verified ? .verifiedManifest : .manifest)
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
            for key in signers { mark.raise(key, to: order) }
        }
        channelMarks[channel] = mark
    }

    /// What an evaluation accepted (`accepted`, made from the snapshot `before`), merged into
    /// this state (as it is now, under the lock): the pins it changed, and the marks, each
    /// rising to the higher of the two.
    mutating func merge(acceptance accepted: StoreState, before: StoreState) {
        if let p = accepted.pin, p != before.pin, pin == nil || (pin?.source == .manifest && p.source == .verifiedManifest) { pin = p }
        if let c = accepted.channelPin, c != before.channelPin, c != channelPin,
           c.source == .option || channelPin == nil || (channelPin?.source == .manifest && c.source == .verifiedManifest) {
            channelPin = c
        }
        if legacyTrust == nil { legacyTrust = accepted.legacyTrust }
        highestVersion = max(highestVersion, accepted.highestVersion)
        highestVerifiedVersion = max(highestVerifiedVersion ?? 0, accepted.highestVerifiedVersion ?? 0)
        for (name, mark) in accepted.channelMarks {
            var merged = channelMarks[name] ?? ChannelMark()
            merged.highest = max(merged.highest, mark.highest)
            if let v = mark.highestVerified, v >= merged.highestVerified ?? .zero {
                merged.highestVerified = v
                merged.verifiedSigners = mark.verifiedSigners
            }
            for (key, order) in mark.bySigner { merged.raise(key, to: order) }
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
