/// The values a client hands the host: what a check found, what a release is, the lifecycle.

/// The result of a check: the release an update would install and what it would transfer.
public struct CheckResult: Sendable {
    public var version: Int64
    public var downloadBytes: UInt64
}

/// What the host may show about a release: "what's new", and whether to insist on it.
public struct ReleaseSummary: Sendable, Equatable {
    public var version: Int64
    /// Unix seconds, from the manifest; nil when it gives none.
    public var created: Int64?
    public var label: String?
    public var notes: String?
    public var mandatory: Bool
    public var signatureVerified: Bool
    /// Confirmed with mark_good (installed releases only).
    public var markedGood: Bool
}

/// The release lifecycle as hosts see it (`assetpatch_lifecycle_get`, the Swift API's
/// `lifecycle`): one mapping from the state, shared by both.
public struct LifecycleSummary: Sendable, Equatable {
    /// 0: only the bundle is served.
    public var activeVersion: Int64
    /// A release installed with apply=next_open, served from the next open; 0: none.
    public var pendingVersion: Int64
    public var activeMarkedGood: Bool
    /// Opens of the active release since it was activated, while not marked good.
    public var launches: Int
    public var maxFailedLaunches: Int
    /// Versions rolled back from, skipped by updates until a newer one is published.
    public var badVersions: Int
    public var lastRollback: RollbackRecord?

    init(_ s: StoreState) {
        activeVersion = s.active?.version ?? 0
        pendingVersion = s.pending?.version ?? 0
        activeMarkedGood = s.activeIsGood
        launches = s.launches
        maxFailedLaunches = s.maxFailedLaunches
        badVersions = s.bad.count
        lastRollback = s.lastRollback
    }
}

/// Which release a summary is asked for (`assetpatch_release_which`).
public enum WhichRelease: Int32, Sendable {
    case active = 1, pending = 2, candidate = 3
}

/// What an update would do now: the release, how its files would arrive, what it would transfer.
public struct UpdatePreview: Sendable {
    /// The release an update would install.
    public var candidate: ReleaseSummary
    public var version: Int64 { candidate.version }
    /// nil: a differential update; otherwise why the whole archive would be downloaded.
    public var wholeArchiveReason: String?
    /// Bytes still to transfer (resumable bytes already on disk not counted).
    public var transferBytes: UInt64
    /// The archive's size as the manifest says (0 for a legacy manifest).
    public var archiveBytes: UInt64
    /// Requests: range requests of a differential update, 1 for the whole archive.
    public var requests: Int
    /// Files that would come from the archive.
    public var fetchedFiles: [String] = []
    /// Files that would be linked from installed releases or earlier attempts.
    public var linkedFiles = 0
    /// Files that would be copied from the bundle.
    public var bundleFiles = 0
}

/// Why a check or update found nothing to install (`assetpatch_no_update_reason`).
public enum NoUpdateReason: Int32, Sendable {
    /// The manifest offers the release installed (active, or pending for the next open).
    case current = 1
    /// The manifest is older than one accepted before: a cache still serving an old manifest
    /// (staleness adds up across cache tiers), or a replay. Nothing older is ever installed.
    case older = 2
    /// The manifest offers a version this client rolled back from.
    case badVersion = 3
    /// The app's bundle already carries that release, or a newer one.
    case inBundle = 4
}

/// What the last check or update of a client found (`assetpatch_last_check`).
public struct CheckOutcome: Sendable, Equatable {
    /// `.ok` (a release to install was found, or installed), `.noUpdate`, or the error.
    public var status: Status
    /// Why there was nothing to install; nil unless `status` is `.noUpdate`.
    public var reason: NoUpdateReason?
    /// The version the manifest offered; 0 when none was read (or a legacy manifest).
    public var manifestVersion: Int64
    /// The highest version accepted before (the downgrade mark in force).
    public var acceptedVersion: Int64

    public init(status: Status, reason: NoUpdateReason? = nil, manifestVersion: Int64 = 0, acceptedVersion: Int64 = 0) {
        self.status = status
        self.reason = reason
        self.manifestVersion = manifestVersion
        self.acceptedVersion = acceptedVersion
    }
}
