import Glibc

/// One installed release, as the state file records it.
package struct ReleaseRef: Sendable, Equatable {
    package var id: String
    package var version: Int64
    /// Whether its manifest's signature was verified; nil in states written before 0.4 (the
    /// release's record says).
    package var verified: Bool?
    /// The channel it was installed from; nil: the default channel (and every release
    /// installed before 0.4).
    package var channel: String?
    /// The trusted keys whose signatures vouched for it; nil when not recorded (installed
    /// before 0.5, or unverified).
    package var signers: [[UInt8]]?
    /// Its manifest's `contentDigest` (nil before 0.5): a later signing of the same release
    /// vouches for it again.
    package var content: String?

    package init(id: String, version: Int64, verified: Bool? = nil, channel: String? = nil,
                 signers: [[UInt8]]? = nil, content: String? = nil) {
        self.id = id
        self.version = version
        self.verified = verified
        self.channel = channel == Channel.defaultName ? nil : channel
        self.signers = signers
        self.content = content
    }

    package var channelName: String { channel ?? Channel.defaultName }
}

/// The manifests accepted from one channel: the newest of all, and the newest whose signature
/// was verified (the mark in force once keys are set).
package struct ChannelMark: Sendable, Equatable {
    package var highest: ManifestOrder = .zero
    /// nil when not known yet (a state written before 0.4).
    package var highestVerified: ManifestOrder? = .zero
    /// The keys whose signatures vouched for `highestVerified`; nil when not recorded (accepted
    /// before 0.5). A key document that retires them ends the mark (`StoreState.judge`).
    package var verifiedSigners: [[UInt8]]?
    /// Each signing key's own highest verified manifest: where the mark falls back to when the
    /// keys that vouched for it are retired (what the keys still in force signed).
    package var bySigner: [[UInt8]: ManifestOrder] = [:]

    package init(highest: ManifestOrder = .zero, highestVerified: ManifestOrder? = .zero, verifiedSigners: [[UInt8]]? = nil) {
        self.highest = highest
        self.highestVerified = highestVerified
        self.verifiedSigners = verifiedSigners
    }
}

/// Why the active release last changed by going back, for the host and `assetpatch status`.
package struct RollbackRecord: Sendable, Equatable {
    package var from: Int64
    /// 0: the bundle.
    package var to: Int64
    package var reason: String
    package var time: Int64
}

/// The persistent state of a data directory. It changes only by `Store.modifyState` (under
/// the state lock, one atomic rename), so a crash leaves either the old or the new state and
/// concurrent writers never lose each other's changes.
package struct StoreState: Sendable, Equatable {
    package var active: ReleaseRef?
    /// Earlier releases kept for rollback and for paths already handed out, newest first.
    package var kept: [ReleaseRef] = []
    /// Installed with apply=next_open, activated by the next open.
    package var pending: ReleaseRef?
    /// The downgrade mark: the highest format-1 version ever accepted.
    package var highestVersion: Int64 = 0
    /// The highest format-1 version ever accepted with a verified signature: the mark in force
    /// once `public_keys` is set. nil in states written before 0.4 (the open works it out).
    package var highestVerifiedVersion: Int64? = 0
    /// The downgrade marks of each channel a manifest was accepted from: a replay is judged
    /// within its channel, so a move to a channel whose versions are lower is not taken for one.
    package var channelMarks: [String: ChannelMark] = [:]
    /// The highest version ever installed (legacy releases are numbered after it).
    package var highestInstalled: Int64 = 0
    /// The package manifests must name, and who named it (see `PackagePin`).
    package var pin: PackagePin?
    /// The channel manifests must name, and who named it (see `ChannelPin`); nil in states
    /// written before 0.5 (the active release's channel is then in force).
    package var channelPin: ChannelPin?
    /// What is assumed of marks and releases accepted before signers were recorded, set when
    /// the state is first judged by the keys in force (`judge`).
    package var legacyTrust: LegacyTrust?
    /// The package the bundle marker names (its `bundleVersion` is of that package).
    package var bundlePackage: String?
    /// Versions rolled back from; never re-installed.
    package var bad: [Int64] = []
    /// md5 of the active legacy archive (a legacy manifest with it is "no update").
    package var activeLegacyDigest: String?
    package var pendingLegacyDigest: String?
    /// Releases confirmed with `assetpatch_mark_good` (ids; only live ones are kept).
    package var good: [String] = []
    /// Opens since the active release was activated while it was not marked good.
    package var launches = 0
    /// `max_failed_launches` as last set by any client of this data directory; 0 = never.
    package var maxFailedLaunches = 0
    package var lastRollback: RollbackRecord?
    /// The release the app's bundle carries (its `assetpatch-bundle.json`); 0 when it says none.
    /// Releases up to it are not served and not installed: the bundle has them.
    package var bundleVersion: Int64 = 0
    /// What the bundle looked like at the last open (an app upgrade changes it).
    package var bundleFingerprint: String?
    /// The on-demand groups each release has on disk, the pinned ones, and their use.
    package var groups = GroupState()

    package init() {}

    /// Whether the active release was confirmed with mark_good.
    package var activeIsGood: Bool { active.map { good.contains($0.id) } ?? false }

    /// Makes a release installed with apply=next_open the active one, keeping the previous
    /// active release first in `kept`. False when none was pending.
    mutating func activatePending() -> Bool {
        guard let pending else { return false }
        if let old = active { kept.insert(old, at: 0) }
        active = pending
        activeLegacyDigest = pendingLegacyDigest
        self.pending = nil
        pendingLegacyDigest = nil
        launches = 0
        return true
    }

    /// Goes back from the active release to the newest kept one, or to the bundle: the release
    /// rolled back from is remembered as bad (updates skip its version). Throws `.state` when
    /// only the bundle is served.
    mutating func rollBack(reason: String, now: Int64) throws {
        guard let from = active else { throw AssetPatchError(.state, "nothing to roll back: only the bundle is served") }
        if !bad.contains(from.version) { bad.append(from.version) }
        leaveActive(from, reason: reason, now: now)
        good.removeAll { $0 == from.id }
    }

    /// Serves the newest kept release (or the bundle) instead of `from`, the active one, and
    /// records why.
    private mutating func leaveActive(_ from: ReleaseRef, reason: String, now: Int64) {
        active = kept.first
        if !kept.isEmpty { kept.removeFirst() }
        activeLegacyDigest = nil
        launches = 0
        lastRollback = RollbackRecord(from: from.version, to: active?.version ?? 0, reason: reason, time: now)
    }

    /// Stops serving the active release for `reason`, going to the newest kept release that
    /// `keep` accepts (or the bundle), without marking anything bad: the releases left may fit
    /// another app. Releases `keep` refuses leave `kept` and `pending` too. Returns the message
    /// for the log, or nil when the active release is kept.
    mutating func supersede(keeping keep: (ReleaseRef) -> Bool, reason: String, now: Int64) -> String? {
        if let p = pending, !keep(p) { pending = nil; pendingLegacyDigest = nil }
        kept = kept.filter(keep)
        guard let from = active, !keep(from) else { return nil }
        leaveActive(from, reason: reason, now: now)
        return "stopped serving version \(from.version), now \(active.map { "version \($0.version)" } ?? "the bundle"): \(reason)"
    }

    /// An open of the data directory: activates a pending release (that open counts as the
    /// first launch), counts a launch of an active release not marked good, and rolls back once
    /// the count exceeds `maxFailedLaunches`. Returns the rollback's message, if one happened.
    mutating func countLaunch(now: Int64) throws -> String? {
        let activated = activatePending()
        guard let a = active, !good.contains(a.id) else { return nil }
        launches = activated ? 1 : launches + 1
        guard maxFailedLaunches > 0, launches > maxFailedLaunches else { return nil }
        let reason = "crash loop: \(launches) opens of version \(a.version) without mark_good (max_failed_launches \(maxFailedLaunches))"
        try rollBack(reason: reason, now: now)
        return "rolled back from version \(a.version) to \(active.map { "version \($0.version)" } ?? "the bundle"): \(reason)"
    }

    /// The releases the state names: active, pending and kept.
    var liveReleaseIDs: Set<String> {
        var live = Set(kept.map(\.id))
        if let active { live.insert(active.id) }
        if let pending { live.insert(pending.id) }
        return live
    }

    func toJSON() -> JSON {
        func ref(_ r: ReleaseRef?) -> JSON {
            guard let r else { return .null }
            var pairs: [(String, JSON)] = [("id", .string(r.id)), ("version", .int(r.version))]
            if let verified = r.verified { pairs.append(("verified", .bool(verified))) }
            if let channel = r.channel { pairs.append(("channel", .string(channel))) }
            if let signers = r.signers { pairs.append(("signers", keyList(signers))) }
            if let content = r.content { pairs.append(("content", .string(content))) }
            return .object(pairs)
        }
        func string(_ v: String?) -> JSON { v.map { JSON.string($0) } ?? .null }
        var rollback = JSON.null
        if let r = lastRollback {
            rollback = .object([("from", .int(r.from)), ("to", .int(r.to)), ("reason", .string(r.reason)), ("time", .int(r.time))])
        }
        var pairs: [(String, JSON)] = [("format", .int(1)), ("active", ref(active)), ("kept", .array(kept.map { ref($0) })),
                                       ("pending", ref(pending))]
        pairs += [("highest_version", .int(highestVersion)), ("highest_installed", .int(highestInstalled)),
                  ("package", string(pin?.name)), ("bad", .array(bad.map { .int($0) }))]
        pairs += [("package_source", string(pin?.source.rawValue)), ("bundle_package", string(bundlePackage)),
                  ("highest_verified_version", highestVerifiedVersion.map { .int($0) } ?? .null)]
        pairs += [("active_legacy_md5", string(activeLegacyDigest)), ("pending_legacy_md5", string(pendingLegacyDigest))]
        pairs += [("good", .array(good.map { .string($0) })), ("launches", .int(Int64(launches))),
                  ("max_failed_launches", .int(Int64(maxFailedLaunches)))]
        pairs.append(("channels", .object(channelMarks.sorted { $0.key < $1.key }.map { name, mark in
            var fields: [(String, JSON)] = [("highest_version", .int(mark.highest.version)), ("highest_revision", .int(mark.highest.revision)),
                                            ("highest_verified_version", mark.highestVerified.map { .int($0.version) } ?? .null),
                                            ("highest_verified_revision", .int(mark.highestVerified?.revision ?? 0))]
            if let signers = mark.verifiedSigners { fields.append(("verified_signers", keyList(signers))) }
            if !mark.bySigner.isEmpty {
                fields.append(("by_signer", .array(mark.bySigner.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map { key, order in
                    .object([("key", .string(Base64.encode(key))), ("version", .int(order.version)), ("revision", .int(order.revision))])
                })))
            }
            return (name, .object(fields))
        })))
        if let p = channelPin { pairs.append(("channel_pin", .object([("name", .string(p.name)), ("source", .string(p.source.rawValue))]))) }
        switch legacyTrust {
        case let .keys(k)?: pairs.append(("legacy_signing", k.toJSON()))
        case .unknown?: pairs.append(("legacy_signing", .string("unknown")))
        case nil: break
        }
        pairs += [("bundle_version", .int(bundleVersion)), ("bundle_fingerprint", string(bundleFingerprint)),
                  ("last_rollback", rollback)]
        if groups != GroupState() { pairs.append(("groups", groups.toJSON())) }
        return .object(pairs)
    }

    private func keyList(_ keys: [[UInt8]]) -> JSON { .array(keys.map { .string(Base64.encode($0)) }) }

    private static func keyList(_ j: JSON?) -> [[UInt8]]? {
        guard let items = j?.array else { return nil }
        return items.compactMap { $0.string.flatMap(Base64.decode).flatMap { $0.count == Ed25519.keyLength ? $0 : nil } }
    }

    static func from(_ json: JSON) -> StoreState? {
        func ref(_ j: JSON?) -> ReleaseRef?? {
            guard let j, j != .null else { return .some(nil) }
            guard let id = j["id"]?.string, Store.isReleaseID(id), let v = j["version"]?.int64 else { return nil }
            let verified: Bool? = j["verified"] == .bool(true) ? true : j["verified"] == .bool(false) ? false : nil
            let channel = j["channel"]?.string.flatMap { Channel.isValid($0) ? $0 : nil }
            return .some(ReleaseRef(id: id, version: v, verified: verified, channel: channel,
                                    signers: keyList(j["signers"]), content: j["content"]?.string))
        }
        guard json["format"]?.int64 == 1 else { return nil }
        var s = StoreState()
        guard let active = ref(json["active"]), let pending = ref(json["pending"]) else { return nil }
        s.active = active
        s.pending = pending
        for k in json["kept"]?.array ?? [] {
            guard let r = ref(k), let r else { return nil }
            s.kept.append(r)
        }
        s.highestVersion = json["highest_version"]?.int64 ?? 0
        s.highestInstalled = json["highest_installed"]?.int64 ?? 0
        if let name = json["package"]?.string {
            // A pin from before 0.4 has no source: taken as unverified until the open works it out.
            s.pin = PackagePin(name: name, source: json["package_source"]?.string.flatMap(PackagePin.Source.init) ?? .manifest)
        }
        s.bundlePackage = json["bundle_package"]?.string
        s.highestVerifiedVersion = json["highest_verified_version"]?.int64
        s.bad = (json["bad"]?.array ?? []).compactMap { $0.int64 }
        if let channels = json["channels"]?.objectPairs {
            for (name, mark) in channels where Channel.isValid(name) {
                s.channelMarks[name] = ChannelMark(
                    highest: ManifestOrder(version: mark["highest_version"]?.int64 ?? 0, revision: mark["highest_revision"]?.int64 ?? 0),
                    highestVerified: mark["highest_verified_version"]?.int64.map {
                        ManifestOrder(version: $0, revision: mark["highest_verified_revision"]?.int64 ?? 0)
                    },
                    verifiedSigners: keyList(mark["verified_signers"]))
                for item in mark["by_signer"]?.array ?? [] {
                    guard let key = item["key"]?.string.flatMap(Base64.decode), key.count == Ed25519.keyLength,
                          let v = item["version"]?.int64 else { continue }
                    s.channelMarks[name]!.bySigner[key] = ManifestOrder(version: v, revision: item["revision"]?.int64 ?? 0)
                }
            }
        } else if s.highestVersion > 0 || s.highestVerifiedVersion ?? 0 > 0 {
            // Before 0.4 every manifest was of the default channel.
            s.channelMarks[Channel.defaultName] = ChannelMark(highest: ManifestOrder(version: s.highestVersion),
                                                              highestVerified: s.highestVerifiedVersion.map { ManifestOrder(version: $0) })
        }
        if let p = json["channel_pin"], let name = p["name"]?.string, Channel.isValid(name),
           let source = p["source"]?.string.flatMap(ChannelPin.Source.init) {
            s.channelPin = ChannelPin(name: name, source: source)
        }
        if let k = json["legacy_signing"] {
            s.legacyTrust = k.string == "unknown" ? .unknown : (try? KeySet.decode(k, "legacy_signing", source: "state")).map { .keys($0) }
        }
        s.activeLegacyDigest = json["active_legacy_md5"]?.string
        s.pendingLegacyDigest = json["pending_legacy_md5"]?.string
        s.good = (json["good"]?.array ?? []).compactMap { $0.string }.filter(Store.isReleaseID)
        s.launches = Int(max(0, min(json["launches"]?.int64 ?? 0, 1 << 30)))
        s.maxFailedLaunches = Int(max(0, min(json["max_failed_launches"]?.int64 ?? 0, 1 << 30)))
        s.bundleVersion = json["bundle_version"]?.int64 ?? 0
        s.bundleFingerprint = json["bundle_fingerprint"]?.string
        if let r = json["last_rollback"], let from = r["from"]?.int64, let to = r["to"]?.int64, let reason = r["reason"]?.string {
            s.lastRollback = RollbackRecord(from: from, to: to, reason: reason, time: r["time"]?.int64 ?? 0)
        }
        s.groups = GroupState.from(json["groups"])
        return s
    }
}
