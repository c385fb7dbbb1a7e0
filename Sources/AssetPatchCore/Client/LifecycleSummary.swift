/// The release lifecycle as hosts see it (`assetpatch_lifecycle_get`, the Swift API's
/// `lifecycle`): one mapping from the state, shared by both.
package struct LifecycleSummary: Sendable, Equatable {
    /// 0: only the bundle is served.
    package var activeVersion: Int64
    /// A release installed with apply=next_open, served from the next open; 0: none.
    package var pendingVersion: Int64
    package var activeMarkedGood: Bool
    /// Opens of the active release since it was activated, while not marked good.
    package var launches: Int
    package var maxFailedLaunches: Int
    /// Versions rolled back from, skipped by updates until a newer one is published.
    package var badVersions: Int
    package var lastRollback: RollbackRecord?

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

