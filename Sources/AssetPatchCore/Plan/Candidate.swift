/// A manifest accepted for installation, with everything derived from it.
struct Candidate {
    var manifest: Manifest
    var archive: Location
    var version: Int64
    var releaseID: String
    /// Format 2: the release index, once read. `manifest.files` are then the files this update
    /// installs: the base, install groups, and the on-demand groups in `installedGroups`.
    var index: IndexContents?
    /// The on-demand groups this update installs (what the host wants, what it has on disk).
    var installedGroups: [String] = []
    /// Files of the groups it does not install that the bundle has with their sha256.
    var bundleCopies: [(path: String, sha256: String)] = []
    /// What fetching each on-demand group it does not install would transfer, planned as the
    /// fetch plans it (`groupFetchBytes`).
    var groupFetchBytes: [String: UInt64] = [:]
    /// The delta files the head names (`index.deltas`), each where it is read from.
    var deltaFiles: [(source: DeltaSource, location: Location)] = []
    /// Every file of the release, installed or not.
    var allFiles: [ManifestFile] { index?.files ?? manifest.files }
    /// Every file has its place in the archive: an index lists them all (also when an update
    /// installs none of them: a release whose every file is in on-demand groups).
    var locatesEveryFile: Bool { index != nil || manifest.locatesEveryFile }
}

/// A format-2 release's index, read: its files (as a format-1 manifest lists them) and each
/// chunked file's chunks.
struct IndexContents {
    var files: [ManifestFile]
    var chunks: [String: [ChunkRecord]]
    /// The chunked files whose chunks share history (`LinkedIndex`), by path.
    var linked: Set<String> = []
    /// The release's groups and each file's (`files[i].group` too), nil without groups.
    var groups: GroupTable?
    /// Pages the client did not have, and the bytes their range requests transferred (0 when
    /// read from an archive on disk).
    var newPages: Int
    var fetchedBytes: UInt64
}
