import Glibc

/// A format-2 release's index, read: its files (as a format-1 manifest lists them) and each
/// chunked file's chunks.
struct ResolvedIndex {
    var files: [ManifestFile]
    var chunks: [String: [ChunkRecord]]
    /// Pages the client did not have, and the bytes their range requests transferred (0 when
    /// read from an archive on disk).
    var newPages: Int
    var fetchedBytes: UInt64
}

extension Updater {
    /// Format 2: reads the candidate's index before anything is planned. By range from the
    /// archive when differential updates are on and the server answers ranges; otherwise (or
    /// when it does not) from the whole archive, downloaded (resumable, verified against the
    /// head's digest) — the install then uses that download. The index's total size is held
    /// to `max_release_bytes` as a format-1 manifest's files are.
    func readIndex(_ c: inout Candidate) throws {
        guard c.manifest.kind == .format2, c.index == nil else { return }
        if config.differential {
            do {
                try resolveIndex(&c, from: c.archive)
            } catch let f as DifferentialFallback {
                log(2, "\(f.message); reading the release index from the whole archive")
            }
        }
        if c.index == nil {
            let archive = try fetch(c, try download(for: c))
            try resolveIndex(&c, from: .file(path: archive, url: c.archive.url))
        }
        if c.manifest.releaseBytes > config.maxReleaseBytes {
            throw AssetPatchError(.archive, "\(c.archive.shown): release of \(c.manifest.releaseBytes) bytes exceeds max_release_bytes (\(config.maxReleaseBytes))")
        }
        if let index = c.index, index.newPages > 0 {
            log(1, "release index: \(index.files.count) files (\(index.chunks.count) chunked); \(index.newPages) new index pages, \(index.fetchedBytes) bytes transferred")
        }
    }

    /// Reads the candidate's release index: the root, the file-table pages and the chunk pages
    /// the page store lacks are fetched from the archive (`PageFetch`: by range, or from an
    /// archive on disk), each checked against the reference that names it; then the files are
    /// checked as a format-1 manifest's are (paths, locations, sizes, plugins). Fills the
    /// candidate's files and chunk lists.
    func resolveIndex(_ c: inout Candidate, from source: Location) throws {
        guard let index = c.manifest.index, c.index == nil else { return }
        let pages = PageStore(store)
        let shown = source.shown
        let fetcher = PageFetch(source: source, archiveSize: c.manifest.archiveSize ?? 0, http: http, cancel: cancel, pages: pages)
        var moved: UInt64 = 0, newPages = 0
        func load(_ refs: [(PageRef, UInt64)]) throws -> [[UInt8]] {
            let missing = refs.filter { !pages.has($0.0) }.map { PageFetch.Wanted(ref: $0.0, offset: $0.1) }
            if !missing.isEmpty {
                newPages += missing.count
                let n = source.isFile ? try fetcher.fetch(missing) : try withRetries { try fetcher.fetch(missing) }
                if !source.isFile { moved += n }
            }
            return try refs.map { ref, _ in
                guard let bytes = pages.load(ref) else { throw AssetPatchError(.io, "\(pages.path(ref)): index page missing after it was stored") }
                return bytes
            }
        }

        // The root, first in the index entry; the file-table pages after it, in root order.
        let rootBytes = try load([(index.root, index.offset)])[0]
        guard case let .root(fileRefs) = try IndexPage.decode(rootBytes, source: shown) else {
            throw AssetPatchError(.manifest, "\(shown): the index's root page is not a root page")
        }
        var at = index.offset + UInt64(index.root.compressedSize)
        var located: [(PageRef, UInt64)] = []
        for r in fileRefs {
            located.append((r.page, at))
            at += UInt64(r.page.compressedSize)
        }
        var files: [IndexedFile] = []
        for (bytes, table) in zip(try load(located), fileRefs) {
            guard case let .files(list) = try IndexPage.decode(bytes, source: shown, base: table.base) else {
                throw AssetPatchError(.manifest, "\(shown): the root lists a page that is not a file table")
            }
            if let last = files.last?.file.path, let first = list.first?.file.path, !last.utf8.lexicographicallyPrecedes(first.utf8) {
                throw AssetPatchError(.manifest, "\(shown): the index's file pages are out of order at \"\(first)\"")
            }
            files += list
        }
        // The chunk pages after every file-table page: file by file, in order.
        var chunkRefs: [(PageRef, UInt64)] = []
        for f in files {
            for r in f.chunkPages {
                chunkRefs.append((r, at))
                at += UInt64(r.compressedSize)
            }
        }
        guard at <= index.offset + index.size else {
            throw AssetPatchError(.manifest, "\(shown): the index's pages run past its entry (\(at - index.offset) of \(index.size) bytes)")
        }
        let chunkPages = try load(chunkRefs)
        var next = 0
        var chunks: [String: [ChunkRecord]] = [:]
        for f in files where !f.chunkPages.isEmpty {
            var list: [ChunkRecord] = []
            for _ in f.chunkPages {
                guard case let .chunks(part) = try IndexPage.decode(chunkPages[next], source: shown) else {
                    throw AssetPatchError(.manifest, "\(shown): \"\(f.file.path)\" lists a page that is not a chunk list")
                }
                list += part
                next += 1
            }
            let size = list.reduce(UInt64(0)) { $0 + UInt64($1.size) }
            let compressed = list.reduce(UInt64(0)) { $0 + UInt64($1.compressedSize) }
            guard size == f.file.size, compressed == f.file.location?.compressedSize else {
                throw AssetPatchError(.manifest, "\(shown): the chunks of \"\(f.file.path)\" add up to \(size) bytes (\(compressed) stored), the file is \(f.file.size) (\(f.file.location?.compressedSize ?? 0) stored)")
            }
            chunks[f.file.path] = list
        }
        let list = files.map(\.file)
        try Updater.checkResolvedFiles(list, c.manifest, source: shown)
        c.manifest.files = list
        c.index = ResolvedIndex(files: list, chunks: chunks, newPages: newPages, fetchedBytes: moved)
    }

    /// What a format-1 manifest's decoder checks of its files, for files an index listed:
    /// locations inside the archive and not overlapping, no path both a file and a directory,
    /// plugins among the files.
    static func checkResolvedFiles(_ files: [ManifestFile], _ m: Manifest, source: String) throws {
        let archiveSize = m.archiveSize ?? 0
        for f in files {
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
