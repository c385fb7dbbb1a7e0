import Glibc

/// Which package a client takes manifests of, and who said so.
///
/// One signing key often signs several products, so a valid signature does not say the
/// manifest is for this app: the package does. The host names it when it knows it (the
/// `package` option, or the bundle marker its app ships) and the client takes it from the
/// first manifest it accepts only when the host names none ("trust on first use"). A manifest of
/// another package is refused before it changes anything.
package struct PackagePin: Sendable, Equatable {
    package enum Source: String, Sendable {
        /// The `package` option: the host's word, above every other source.
        case option
        /// The bundle marker (`assetpatch-bundle.json`) of the app's bundle.
        case bundle
        /// The first manifest accepted, its signature verified.
        case verifiedManifest = "verified_manifest"
        /// The first manifest accepted, unverified (no `public_keys` then): it stops counting
        /// once keys are set.
        case manifest
    }

    package var name: String
    package var source: Source

    /// Whether the host, not a manifest, named the package.
    var byHost: Bool { source == .option || source == .bundle }

    /// Whether this pin constrains a client that verifies signatures (or one that doesn't).
    func counts(verifying: Bool) -> Bool { !(verifying && source == .manifest) }
}

/// The rule for a package's name, in manifests and in the `package` option.
enum PackageName {
    static func isValid(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 256 && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }
}

extension StoreState {
    /// The package a manifest must name, or nil when nothing constrains it yet.
    func expectedPackage(verifying: Bool) -> PackagePin? {
        guard let pin, pin.counts(verifying: verifying) else { return nil }
        return pin
    }

    /// The downgrade mark in force for a channel: with keys set, only versions accepted with a
    /// verified signature count (an unsigned manifest of version 2^62, accepted before the app
    /// set keys, must not lock out the genuine releases).
    func downgradeMark(verifying: Bool, channel: String = Channel.defaultName) -> Int64 {
        guard let mark = channelMarks[channel] else { return 0 }
        return verifying ? mark.highestVerified ?? 0 : mark.highest
    }

    /// The highest mark over every channel: what `accepted_version` reports when no manifest
    /// says which channel is meant.
    func downgradeMarkAnyChannel(verifying: Bool) -> Int64 {
        verifying ? highestVerifiedVersion ?? 0 : highestVersion
    }

    /// Accepting a format-1 manifest: it pins its package when nothing did (a verified
    /// manifest also replaces an unverified pin), and raises the downgrade marks (its
    /// channel's, and the highest over all channels).
    mutating func accept(package: String, version: Int64, verified: Bool, channel: String = Channel.defaultName) {
        if pin == nil || (verified && pin?.source == .manifest) {
            pin = PackagePin(name: package, source: verified ? .verifiedManifest : .manifest)
        }
        highestVersion = max(highestVersion, version)
        var mark = channelMarks[channel] ?? ChannelMark()
        mark.highest = max(mark.highest, version)
        if verified {
            highestVerifiedVersion = max(highestVerifiedVersion ?? 0, version)
            mark.highestVerified = max(mark.highestVerified ?? 0, version)
        }
        channelMarks[channel] = mark
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
        bad = []
        let reason = "the \(source == .option ? "package option" : "bundle marker") names package \"\(name)\", not \"\(before.name)\" as pinned before"
        var message = supersede(keeping: { _ in false }, reason: reason, now: now)
        if message == nil { message = "package \"\(name)\" pinned instead of \"\(before.name)\": \(reason)" }
        return message
    }
}
