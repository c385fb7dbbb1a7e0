internal import AssetPatchCore

/// One group of the release a client serves (see docs/groups.md).
public struct ReleaseGroupInfo: Sendable, Equatable {
    public enum State: Sendable { case absent, partial, local }
    public enum Delivery: Sendable { case install, onDemand }
    public var name: String
    public var state: State
    public var delivery: Delivery
    public var pinned: Bool
    public var files: Int
    /// Unpacked bytes of its files, and of those on disk.
    public var totalBytes: UInt64
    public var localBytes: UInt64
    /// Its files' bytes in the archive.
    public var archiveBytes: UInt64
    /// What a fetch would transfer (0 when local), as the update that installed the release
    /// planned it: files found on disk are linked, a chunked file counts whole.
    public var fetchBytes: UInt64

    init(_ g: GroupStatus) {
        name = g.name
        state = g.state == .local ? .local : g.state == .partial ? .partial : .absent
        delivery = g.delivery == .install ? .install : .onDemand
        pinned = g.pinned
        files = g.files
        totalBytes = g.totalBytes
        localBytes = g.localBytes
        archiveBytes = g.archiveBytes
        fetchBytes = g.fetchBytes
    }
}

/// Content on demand: the served release's groups, fetched, evicted and pinned.
extension AssetPatchClient {
    /// The groups of the release this client serves, from memory.
    public func groups() throws(AssetPatchError) -> [ReleaseGroupInfo] {
        let c = try open()
        return try mapped { try c.groupNames.map { ReleaseGroupInfo(try c.groupStatus($0)) } }
    }

    /// One group's state, from memory (no system call). Throws `.notFound` for no such group.
    public func group(_ name: String) throws(AssetPatchError) -> ReleaseGroupInfo {
        let c = try open()
        return ReleaseGroupInfo(try mapped { try c.groupStatus(name) })
    }

    /// Fetches on-demand groups of the served release from its own archive, on a thread of its
    /// own: resumable, verified, durable before its files resolve. Cancelling the calling task
    /// cancels it (`.cancelled`, keeping what arrived).
    /// - Throws: ``AssetPatchError`` `.notFound`, `.quota`, `.network`, `.http`, `.integrity`, `.io`.
    public func fetchGroups(_ names: [String], progress: (@Sendable (UpdateProgress) -> Void)? = nil) async throws(AssetPatchError) {
        let c = try open()
        // Cancelling the task stops this fetch alone, not an update or another fetch.
        let token = CancelToken()
        _ = try await cancellable(progress, cancel: { token.cancel() }) { handler in try c.fetchGroups(names, progress: handler, cancel: token) }
    }

    /// Evicts an on-demand group: its files go once no other client serves them.
    public func evictGroup(_ name: String) throws(AssetPatchError) {
        let c = try open()
        try mapped { try c.evictGroup(name) }
    }

    /// Pins (or unpins) a group: never evicted to make room under the quota.
    public func pinGroup(_ name: String, _ on: Bool = true) throws(AssetPatchError) {
        let c = try open()
        try mapped { try c.pinGroup(name, on) }
    }
}
