import Glibc

extension Store {
    /// Where the chunks an update can copy lie: the installed releases' chunked files (active,
    /// pending, kept; their chunk lists in the page store), and for each file `rebuilt` needs,
    /// the file at its path in an installed release that has no chunk list for it (installed
    /// from a format-1 manifest) and in the bundle, cut and hashed as the publisher cut the new
    /// release (`ChunkScan`, cached). Returns them and how many files on disk were cut now.
    /// `known`: records read already (without their files), by release id. `fetchedFiles`:
    /// the new release's chunked files that earlier attempts fetched whole and that were
    /// verified, with their chunk lists; their places count after the releases'.
    func localChunks(_ state: StoreState, for rebuilt: [(file: ManifestFile, chunks: [ChunkRecord])], chunkSize: Int,
                     bundleDir: String?, known: [String: ReleaseRecord] = [:],
                     fetchedFiles: [(path: String, sha256: String, chunks: [ChunkRecord])] = [],
                     cancel: CancelToken) throws -> (chunks: LocalChunks, scanned: Int) {
        var out = LocalChunks()
        var scanned = 0
        let pages = PageStore(self)
        var listed = Set<String>()
        /// Contents already added, by sha256: releases share unchanged files, and a content's
        /// chunks need one place (`LocalChunks` holds 65,536 files).
        var added = Set<String>()
        var releases: [String] = []
        /// Files pages read for releases without on-demand groups: releases share most pages,
        /// and a content's chunks need one place (a release with groups reads its own, where
        /// which of a page's files are on disk depends on the release).
        var read = Set<String>()
        for ref in [state.active, state.pending].compactMap({ $0 }) + state.kept {
            releases.append(filesDir(ref.id))
            // The files only where some lie in on-demand groups' directories.
            guard var record = known[ref.id] ?? (try? loadRelease(ref.id, listingFiles: false)), !record.indexRoots.isEmpty else { continue }
            if !record.groups.isEmpty {
                guard let full = try? loadRelease(ref.id) else { continue }
                record = full
            }
            // Files of on-demand groups: where they lie, and those not on disk.
            let local = state.groups.local[ref.id] ?? []
            var inGroups: [String: String?] = [:]
            for f in record.files where record.onDemandGroup(of: f) != nil {
                inGroups[f.path] = record.isPresent(f, local: local) ? releaseDir(ref.id) + "/" + record.relativePath(of: f) : .some(nil)
            }
            var own = Set<String>()
            let chunked = record.groups.isEmpty ? record.indexRoots.flatMap { pages.chunkedFiles(root: $0, skipping: [], read: &read) }
                : record.indexRoots.flatMap { pages.chunkedFiles(root: $0, skipping: [], read: &own) }
            for f in chunked {
                let path: String
                if let placed = inGroups[f.file.path] {
                    guard let placed else { continue }
                    path = placed
                } else {
                    path = filesDir(ref.id) + "/" + f.file.path
                }
                // A file whose chunk pages were not kept (a delta made it) is cut on disk below.
                guard f.chunkPages.allSatisfy(pages.has) else { continue }
                listed.insert(path)
                guard added.insert(f.file.sha256).inserted else { continue }
                out.add(path, pages: f.chunkPages) { pages.chunks(of: $0) }
            }
        }
        for f in fetchedFiles where added.insert(f.sha256).inserted { out.add(f.path, f.chunks) }
        if let chunker = Chunker(averageSize: chunkSize) {
            var scan = ChunkScan(store: self, chunker: chunker, cancel: cancel)
            var seen = Set<[UInt64]>()
            for (file, _) in rebuilt {
                var candidates = releases.map { $0 + "/" + file.path }.filter { !listed.contains($0) }
                if let bundleDir { candidates.append(bundleDir + "/" + file.path) }
                for path in candidates {
                    // One scan per file on disk: releases share unchanged files as hard links.
                    guard let f = BundleDigests.Fingerprint(path), seen.insert([f.device, f.inode]).inserted else { continue }
                    if let chunks = try scan.chunks(of: path) { out.add(path, chunks) }
                }
            }
            scanned = scan.scanned
        }
        out.seal()
        return (out, scanned)
    }
}
