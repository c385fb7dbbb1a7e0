extension Manifest {
    /// What a format-1 manifest's decoder checks of its files, for files an index listed:
    /// locations inside the archive and not overlapping, no path both a file and a directory,
    /// plugins among the files.
    static func checkIndexedFiles(_ files: [ManifestFile], _ m: Manifest, source: String) throws {
        let archiveSize = m.archiveSize ?? 0
        var total: UInt64 = 0
        for f in files {
            // Every size is held to max_release_bytes by what is installed; none may overflow.
            let (sum, overflow) = total.addingReportingOverflow(f.size)
            guard !overflow, sum <= UInt64(Int64.max) else {
                throw AssetPatchError(.manifest, "\(source): the index's files add up past 2^63 bytes")
            }
            total = sum
            guard let l = f.location, l.dataOffset <= archiveSize, l.compressedSize <= archiveSize - l.dataOffset,
                  l.dataOffset >= l.headerOffset + 30 + UInt64(f.path.utf8.count), l.method == 8 || l.compressedSize == f.size else {
                throw AssetPatchError(.manifest, "\(source): the index's location of \"\(f.path)\" lies outside the archive or does not fit its entry")
            }
        }
        try Manifest.checkLocations(files, source: source)
        let paths = Set(files.map(\.path))
        if let conflict = ResourceName.fileDirectoryConflict(in: paths) {
            throw AssetPatchError(.manifest, "\(source): \"\(conflict)\" is both a file and a directory")
        }
        for p in m.plugins where !paths.contains(p.path) {
            throw AssetPatchError(.manifest, "\(source): plugin \"\(p.name)\": \(p.path) is not in the index's files")
        }
    }
}
