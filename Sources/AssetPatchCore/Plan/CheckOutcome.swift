/// The values a client hands the host: what a check found, what a release is, the lifecycle.

/// The result of a check: the release an update would install and what it would transfer.
package struct CheckResult: Sendable {
    package var version: Int64
    package var downloadBytes: UInt64
}

/// What the host may show about a release: "what's new", and whether to insist on it.
package struct ReleaseSummary: Sendable, Equatable {
    package var version: Int64
    /// Unix seconds, from the manifest; nil when it gives none.
    package var created: Int64?
    package var label: String?
    package var notes: String?
    package var mandatory: Bool
    package var signatureVerified: Bool
    /// Confirmed with mark_good (installed releases only).
    package var markedGood: Bool
    /// The channel it comes from.
    package var channel: String = Channel.defaultName
    /// Its manifest's rollout share in basis points (a candidate: in force at the check; an
    /// installed release: when it was installed); nil: no rollout.
    package var rolloutBasisPoints: Int32?
}

/// Which release a summary is asked for (`assetpatch_release_which`).
package enum WhichRelease: Int32, Sendable {
    case active = 1, pending = 2, candidate = 3
}

/// What an update would do now: the release, how its files would arrive, what it would transfer.
package struct UpdatePreview: Sendable {
    /// The release an update would install.
    package var candidate: ReleaseSummary
    package var version: Int64 { candidate.version }
    /// nil: a differential update; otherwise why the whole archive would be downloaded.
    package var wholeArchiveReason: String?
    /// Bytes still to transfer (resumable bytes already on disk not counted).
    package var transferBytes: UInt64
    /// The archive's size as the manifest says (0 for a legacy manifest).
    package var archiveBytes: UInt64
    /// Requests: range requests of a differential update, 1 for the whole archive.
    package var requests: Int
    /// Files that would come from the archive.
    package var fetchedFiles: [String] = []
    /// Files that would be linked from installed releases or earlier attempts.
    package var linkedFiles = 0
    /// Files that would be copied from the bundle.
    package var bundleFiles = 0
}

/// Why a check or update found nothing to install (`assetpatch_no_update_reason`).
package enum NoUpdateReason: Int32, Sendable {
    /// The manifest offers the release installed (active, or pending for the next open).
    case current = 1
    /// The manifest is older than one accepted before: a cache still serving an old manifest
    /// (staleness adds up across cache tiers), or a replay. Nothing older is ever installed.
    case older = 2
    /// The manifest offers a version this client rolled back from.
    case badVersion = 3
    /// The app's bundle already carries that release, or a newer one.
    case inBundle = 4
    /// The manifest's staged rollout does not include this client (yet), or is halted.
    case notInRollout = 5
    /// Not given since 0.5 (kept for the ABI): a client follows one channel, and moves to
    /// another, up or down, only when the host names it (option `channel`), at once.
    case channelBehind = 6
}

/// What the last check or update of a client found (`assetpatch_last_check`).
package struct CheckOutcome: Sendable, Equatable {
    /// `.ok` (a release to install was found, or installed), `.noUpdate`, or the error.
    package var status: Status
    /// Why there was nothing to install; nil unless `status` is `.noUpdate`.
    package var reason: NoUpdateReason?
    /// The version the manifest offered; 0 when none was read (or a legacy manifest).
    package var manifestVersion: Int64
    /// The highest version accepted before (the downgrade mark in force).
    package var acceptedVersion: Int64
    /// Whose head it took: 0 `manifest_url`, N the Nth mirror; nil when it took none.
    package var source: Int?
    /// The manifest's channel; nil when none was read.
    package var channel: String?
    /// The manifest's rollout: the share in force (basis points) and this client's bucket.
    package var rollout: (basisPoints: Int32, bucket: Int)?
    /// When the manifest expires (Unix seconds); nil when it never does or none was read.
    package var manifestExpires: Int64?
    /// The head read in place of `manifest_url` because the manifest there names it (format.md,
    /// "The head"), as shown; nil when `manifest_url` itself was read.
    package var namedHead: String?

    package static func == (a: CheckOutcome, b: CheckOutcome) -> Bool {
        a.status == b.status && a.reason == b.reason && a.manifestVersion == b.manifestVersion && a.acceptedVersion == b.acceptedVersion
            && a.channel == b.channel && a.rollout?.basisPoints == b.rollout?.basisPoints && a.rollout?.bucket == b.rollout?.bucket
    }

    package init(status: Status, reason: NoUpdateReason? = nil, manifestVersion: Int64 = 0, acceptedVersion: Int64 = 0,
                 channel: String? = nil) {
        self.channel = channel
        self.status = status
        self.reason = reason
        self.manifestVersion = manifestVersion
        self.acceptedVersion = acceptedVersion
    }
}
