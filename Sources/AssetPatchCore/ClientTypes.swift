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
