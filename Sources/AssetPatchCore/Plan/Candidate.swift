/// A manifest accepted for installation, with everything derived from it.
struct Candidate {
    var manifest: Manifest
    var archive: Location
    var version: Int64
    var releaseID: String
    /// Format 2: the release index, once read (its files are then `manifest.files`).
    var index: IndexContents?
}

/// A format-2 release's index, read: its files (as a format-1 manifest lists them) and each
/// chunked file's chunks.
struct IndexContents {
    var files: [ManifestFile]
    var chunks: [String: [ChunkRecord]]
    /// Pages the client did not have, and the bytes their range requests transferred (0 when
    /// read from an archive on disk).
    var newPages: Int
    var fetchedBytes: UInt64
}
