/// An outcome event: one fact about updates and the release lifecycle, reported alike by every
/// device (docs/release-management.md, "Rollout health" lists every kind and field). The
/// client appends them to its data directory's outbox; the publisher's gate
/// (`RolloutGate`) counts them. One JSON object per line, with the fields every event has:
///
/// `{"seq":7,"time":"2026-11-27T10:00:00Z","event":"rollback","package":"com.example.game",
///   "channel":"stable","version":12,"app_version":"2.1.0","device":"6f1c…","stream":"9a0e…",
///   "library":"0.5.0", …the kind's own fields}`
package struct OutcomeEvent: Sendable {
    /// The event codes: stable, part of the contract (a new kind may be added, none renamed).
    package enum Kind: String, Sendable, CaseIterable {
        case check, download, install, activate, launch
        case markedGood = "marked_good"
        case rollback
        case pluginLoadFailed = "plugin_load_failed"
        case groupFetch = "group_fetch"
    }

    /// Why a release stopped being served (`rollback`'s `cause`).
    package enum RollbackCause: String, Sendable {
        /// More opens without mark_good than max_failed_launches.
        case crashLoop = "crash_loop"
        /// The host called rollback.
        case host
        /// The app's bundle now carries the release or a newer one.
        case appUpgrade = "app_upgrade"
        /// The host's app_version is outside the release's app versions.
        case incompatible
        /// Keys are set and the release was installed without a verified signature.
        case untrusted
        /// The host named another package (option package).
        case package
    }

    package var kind: Kind
    /// The release the event is about (0: the bundle, or none known).
    package var version: Int64
    /// Its channel; nil: the client's channel option, or the default.
    package var channel: String?
    /// The kind's own fields, in order.
    package var fields: [(String, JSON)]

    package init(_ kind: Kind, version: Int64, channel: String? = nil, _ fields: [(String, JSON)] = []) {
        self.kind = kind
        self.version = version
        self.channel = channel
        self.fields = fields
    }

    /// What every event carries besides its own fields.
    package struct Common: Sendable {
        package var package: String?
        package var appVersion: String?
        /// `OutcomeEvent.device(package:rolloutID:)`.
        package var device: String?
        package var channel: String

        package init(package: String?, appVersion: String?, device: String?, channel: String) {
            self.package = package
            self.appVersion = appVersion
            self.device = device
            self.channel = channel
        }
    }

    /// The event as one line of JSON (no newline).
    package func line(seq: UInt64, stream: String, time: Int64, _ common: Common) -> String {
        func optional(_ s: String?) -> JSON { s.map { .string($0) } ?? .null }
        var pairs: [(String, JSON)] = [
            ("seq", .number(String(seq))), ("time", .string(RFC3339.format(time))), ("event", .string(kind.rawValue)),
            ("package", optional(common.package)), ("channel", .string(channel ?? common.channel)), ("version", .int(version)),
            ("app_version", optional(common.appVersion)), ("device", optional(common.device)), ("stream", .string(stream)),
            ("library", .string(AssetPatchVersion.string)),
        ]
        pairs += fields
        return JSON.object(pairs).serialized()
    }

    /// The device's id in events: the first 16 hex digits of
    /// sha256("assetpatch-device:<package>:<id>"), where id is the data directory's own random
    /// rollout id (`rollout-id`), never the host's `rollout_id` option: stable for a data
    /// directory and a package whatever options a session sets, so a gate can count devices;
    /// not an id of the host's (a user id could be found again by trying every one), not the
    /// rollout id itself (it would tell which future rollouts include the device), and not
    /// linkable across packages.
    package static func device(package: String, rolloutID: String) -> String {
        String(Hex.encode(Digest.sha256(Array("assetpatch-device:\(package):\(rolloutID)".utf8))).prefix(16))
    }
}
