import Glibc

extension Updater {
    /// Format 2: reads the candidate's index before anything is planned. By range from the
    /// archive when differential updates are on and the server answers ranges; otherwise (or
    /// when it does not) from the whole archive, downloaded (resumable, verified against the
    /// head's digest) — the install then uses that download. The index's total size is held
    /// to `max_release_bytes` as a format-1 manifest's files are. `mayDownload` false (a check,
    /// a look): no archive byte is fetched but the index's own ranges; when those cannot be
    /// had, returns why the update would download the whole archive instead.
    @discardableResult
    func readIndex(_ c: inout Candidate, _ state: StoreState, mayDownload: Bool = true) throws -> String? {
        guard c.manifest.kind == .format2, c.index == nil else { return nil }
        if config.differential {
            do {
                // A file a delta makes needs no chunk list (a 33 MB pack's is 150 KB): should
                // the delta fail, the file comes whole. Only where the delta's base is on disk.
                let byDelta = try deltaTargets(c, state)
                try walkIndex(&c, from: c.archive, skippingChunksOf: byDelta) { self.chunksInstalled($0, files: $1, state) }
            } catch let f as DifferentialFallback {
                guard mayDownload else {
                    return "the host does not answer range requests as asked (\(f.message)): an update downloads the whole archive and reads the release index from it"
                }
                log(.warning, "\(f.message); reading the release index from the whole archive")
            }
        } else if !mayDownload {
            return "differential=off: an update downloads the whole archive"
        }
        if c.index == nil {
            let d = try download(for: c)
            if config.metered, !c.archive.isFile { try allowMetered(try transferEstimate(d), known: d.expectedSize != nil, "version \(c.version) (the whole archive)") }
            let archive = try fetch(c, d)
            try walkIndex(&c, from: .file(path: archive, url: c.archive.url)) { self.chunksInstalled($0, files: $1, state) }
        }
        // What this update installs of the release: the bytes held to max_release_bytes.
        selectGroups(&c, state)
        if judgedBytes(c) > config.maxReleaseBytes {
            throw AssetPatchError(.archive, "\(c.archive.shown): release of \(judgedBytes(c)) bytes exceeds max_release_bytes (\(config.maxReleaseBytes))")
        }
        if let index = c.index, index.newPages > 0 {
            log(.info, "release index: \(index.files.count) files (\(index.chunks.count) chunked); \(index.newPages) new index pages, \(index.fetchedBytes) bytes transferred")
        }
        return nil
    }

    /// Reads the candidate's release index (`IndexReader.walk`): the pages the page store lacks
    /// are fetched from the archive (`PageFetch`: by range, or from an archive on disk), each
    /// checked against the reference that names it; then the files are
    /// checked as a format-1 manifest's are (paths, locations, sizes, plugins). Fills the
    /// candidate's files and chunk lists.
    /// `skippingChunksOf`: contents (sha256 hex) whose chunk lists are not read.
    func walkIndex(_ c: inout Candidate, from source: Location, groups known: GroupTable? = nil, skippingChunksOf skip: Set<String> = [],
                   chunksOf: (GroupTable, [ManifestFile]) -> (Int) -> Bool) throws {
        guard let index = c.manifest.index, c.index == nil else { return }
        let pages = PageStore(store, readOnly: readOnly)
        let shown = source.shown
        let fetcher = PageFetch(source: source, archiveSize: c.manifest.archiveSize ?? 0, http: http, cancel: cancel, pages: pages,
                                sources: source.isFile ? nil : context.sources)
        var moved: UInt64 = 0, newPages = 0
        func prefetch(_ refs: [(PageRef, UInt64)]) throws {
            var seen = Set<PageRef>()
            let missing = refs.filter { !pages.has($0.0) && seen.insert($0.0).inserted }.map { PageFetch.Wanted(ref: $0.0, offset: $0.1) }
            guard !missing.isEmpty else { return }
            newPages += missing.count
            let n = try context.retrying(source) { try fetcher.fetch(missing) }
            if !source.isFile { moved += n }
        }
        func load(_ refs: [(PageRef, UInt64)]) throws -> [[UInt8]] {
            try prefetch(refs)
            return try refs.map { ref, offset in
                if let bytes = pages.load(ref) { return bytes }
                // Damaged on disk since it was stored (`load` removed it): fetched again, once.
                log(.warning, "\(pages.path(ref)): index page damaged on disk; fetching it again")
                try prefetch([(ref, offset)])
                guard let bytes = pages.load(ref) else { throw AssetPatchError(.io, "\(pages.path(ref)): index page missing after it was stored") }
                return bytes
            }
        }

        // The group page, last in the index entry (`GroupTable`), read once the file tables
        // are: only the chunk lists of the files `chunksOf` takes (by number) are loaded.
        var table: GroupTable?
        var indexed: IndexedFiles, chunks: [String: [ChunkRecord]]
        (indexed, chunks) = try IndexReader.walk(index, source: shown, prefetch: prefetch, chunksWanted: { files in
            if let known {
                // An installed release's table, read from the archive when it was installed.
                guard known.fileGroups.count == files.count else {
                    throw AssetPatchError(.io, "\(shown): the release's group table lists \(known.fileGroups.count) files, its index \(files.count)")
                }
                table = known
            } else if let ref = index.groups, let at = index.groupsOffset {
                table = try GroupTable.decode(try load([(ref, at)])[0], files: files.count, source: shown)
            }
            let wanted = table.map { chunksOf($0, files) } ?? { _ in true }
            guard !skip.isEmpty else { return wanted }
            return { i in wanted(i) && !skip.contains(files[i].sha256) }
        }, refused: { log(.warning, $0) }, load: load)
        // The list is held once: taken out, so that setting its groups does not copy it.
        var list = indexed.files
        indexed.files = []
        try Manifest.checkIndexedFiles(list, c.manifest, source: shown)
        if let table {
            for i in list.indices { list[i].group = table.fileGroups[i] }
            if known == nil { try table.check(list, source: shown) }
        }
        c.manifest.files = list
        c.index = IndexContents(files: list, chunks: chunks, linked: Set(indexed.chunked.filter(\.linked).map { list[$0.file].path }), groups: table,
                                newPages: newPages, fetchedBytes: moved)
    }
}
