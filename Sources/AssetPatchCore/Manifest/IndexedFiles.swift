/// A release's files as its index lists them, in path order: the list a format-1 manifest's
/// `files` would be, and beside it the few chunked files' chunk pages. Apart, because an entry
/// with its chunk pages (`IndexedFile`) is 16 bytes more than a file alone and only chunked files
/// need them: 100,000 files are one list of 8.8 MB, not that list and a copy of it with pages.
package struct IndexedFiles: Sendable, Equatable {
    package var files: [ManifestFile] = []
    /// The chunked files, in the order of their numbers in `files`.
    package var chunked: [Chunked] = []

    package struct Chunked: Sendable, Equatable {
        /// Its number in `files`.
        package var file: Int
        package var pages: [PageRef]
        /// Its chunks share history (`IndexedFile.linked`).
        package var linked: Bool
    }

    package init() {}

    /// Adds a file at the end (after the files before it in path order).
    mutating func append(_ f: IndexedFile) {
        if !f.chunkPages.isEmpty { chunked.append(Chunked(file: files.count, pages: f.chunkPages, linked: f.linked)) }
        files.append(f.file)
    }
}

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
        // In path order (as the index reader holds them), both checks need no set of the paths.
        let paths = files.lazy.map(\.path)
        if let conflict = try ResourceName.fileDirectoryConflict(sorted: paths, source: source) {
            throw AssetPatchError(.manifest, "\(source): \"\(conflict)\" is both a file and a directory")
        }
        for p in m.plugins where !ResourceName.contains(sorted: paths, p.path) {
            throw AssetPatchError(.manifest, "\(source): plugin \"\(p.name)\": \(p.path) is not in the index's files")
        }
    }
}
