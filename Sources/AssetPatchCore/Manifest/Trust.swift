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

/// Which channel a client takes manifests of, and who said so. Like the package, the channel is
/// pinned: a mirror or an edge serving another channel's signed head at this channel's URL must
/// not move the client (onto a channel whose rollout, halt or versions differ). The host moves
/// it by naming the channel (the `channel` option); without it, the first manifest accepted pins
/// its channel.
package struct ChannelPin: Sendable, Equatable {
    package enum Source: String, Sendable {
        /// The `channel` option.
        case option
        case verifiedManifest = "verified_manifest"
        /// Unverified: it stops counting once keys are set.
        case manifest
    }

    package var name: String
    package var source: Source

    package init(name: String, source: Source) {
        self.name = name
        self.source = source
    }

    func counts(verifying: Bool) -> Bool { !(verifying && source == .manifest) }
}
