import Glibc

/// Extracts a downloaded archive into `staging/<id>/`, checking every entry against the
/// manifest (names, sizes, sha256 as each file is written), and seals the staging directory
/// (release record, names file, every file and directory made durable). A file whose sha256 an
/// installed release already has is hard-linked from it instead (release files are read-only,
/// so sharing them is safe): two kept releases take about one release's disk plus the changes.
/// Runs on the updating thread.
struct Installer {
    let store: Store
    /// `max_release_bytes`: a legacy archive's entries are held to it.
    let maxReleaseBytes: UInt64
    let cancel: CancelToken
    let progress: ProgressReporter
    /// Makes the files this install writes durable as they are completed (its fetch hands
    /// over the files it keeps to the same one); the seal syncs only the rest.
    var syncBehind: SyncBehind?

    /// Installs `archive` (a verified download) for `c` in its staging release. `installed`
    /// maps the sha256 of installed releases' files (`Store.installedFiles`) to what may be linked.
    func install(_ c: Candidate, archive: String, installed: InstalledFiles) throws {
        // Extracting by the zip's own directory (a legacy archive, or one whose entries
        // disagree with the index) installs every file: a release with groups can't be.
        if c.index?.groups != nil {
            throw AssetPatchError(.manifest, "\(c.archive.shown): the archive's entries disagree with its signed index, and a release with groups is installed by its index only")
        }
        let reusable = !c.manifest.isLegacy ? installed : .empty
        try store.prepareStaging(c.releaseID)
        let filesDir = store.stagingFilesDir(c.releaseID)
        let shown = c.archive.shown
        let zip = try ZipReader(path: archive, source: shown)
        let entries = try checkedEntries(zip, c)
        /// The manifest's files by path, as their numbers in its list.
        var expected: [String: Int] = [:]
        for (i, f) in c.manifest.files.enumerated() { expected[f.path] = i }

        let totalBytes = entries.reduce(UInt64(0)) { $0 + $1.uncompressedSize }
        var bytesDone: UInt64 = 0
        var files: [ManifestFile] = []
        files.reserveCapacity(entries.count)
        var madeDirs = Set<String>()
        /// By number in the manifest's list (the record's: a legacy manifest's links nothing).
        var durable = [Bool](repeating: false, count: c.manifest.files.count)
        let buffers = ZipBuffers()
        var counts = InstallCounts(progress: progress, bytesTotal: totalBytes, filesTotal: UInt64(entries.count))
        counts.report(0, files: 0)
        for (i, e) in entries.enumerated() {
            try cancel.check()
            if let dir = e.name.beforeLastSlash, !madeDirs.contains(dir) {
                try FS.makeDirectories(filesDir + "/" + dir)
                madeDirs.insert(dir)
            }
            if let n = expected[e.name], case let f = c.manifest.files[n], let source = reusable[f]?.place.full,
               link(source, to: filesDir + "/" + e.name, size: f.size) {
                durable[n] = true
                bytesDone += f.size
                counts.reuse(f.size)
                files.append(f)
                counts.report(bytesDone, files: i + 1)
                continue
            }
            // O_EXCL|O_NOFOLLOW: never write through something already there.
            let out = try File.open(filesDir + "/" + e.name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o444)
            let digest = try Digest(.sha256)
            var written: UInt64 = 0
            try zip.extract(e, buffers: buffers) { chunk in
                try out.write(chunk)
                digest.update(chunk)
                written += UInt64(chunk.count)
                counts.report(bytesDone + written, files: i)
            }
            out.startWriteback()
            let sha = digest.finalHex()
            if let n = expected[e.name], case let f = c.manifest.files[n], f.sha256 != sha {
                throw AssetPatchError(.integrity, "\(shown): entry \"\(e.name)\" has sha256 \(sha), the manifest says \(f.sha256)")
            }
            syncBehind?.submit(filesDir + "/" + e.name, waiting: true)
            bytesDone += written
            files.append(ManifestFile(path: e.name, size: written, sha256: sha))
        }
        counts.report(bytesDone, files: entries.count, final: true)

        let info = ReleaseRecord(c, files: !c.manifest.isLegacy ? c.manifest.files : files)
        try store.sealStaging(c.releaseID, info, durable: durable, synced: try syncBehind?.finish() ?? [])
    }

    /// Builds the staging release of a differential update from files on disk: installed and
    /// fetched files are hard-linked (copied where a link fails), bundle files copied (cloned
    /// where the filesystem shares extents); every copy is hashed and must match. `fetched`
    /// gives the path of a file this update fetched (by its content); with `moveFetched` they
    /// are renamed into the release instead (the whole archive they came from is still on disk,
    /// so a crash before the release is active costs a local extraction, not a download). A
    /// local file that does not match throws `DifferentialFallback`.
    /// `spareRead`: the spare's record read already, for `Store.takeSpare`.
    func assemble(_ c: Candidate, _ plan: FilePlan, fetched: (ManifestFile) -> String?, chunks: [String: String] = [:],
                  moveFetched: Bool = false, spareRead: SpareTree.Base? = nil, log: (LogLevel, String) -> Void = { _, _ in }) throws {
        let info = ReleaseRecord(c, files: c.allFiles)
        let roots = info.roots(in: store.stagingDir(c.releaseID) + "/")
        // On the spare tree, if there is one: the files it holds in place are not placed again.
        var spare = try store.takeSpare(into: c.releaseID, info, files: plan.files.release, read: spareRead, cancel: cancel, log: log)
        // A chunked file is rebuilt as planned even where the spare holds it: its rebuild may
        // decode chunks that later files take (and the plan, made before, counted on it).
        for chunked in plan.chunked {
            guard let n = InstalledFiles.number(of: chunked.file.path, in: plan.files.release), spare?.present[n] == true else { continue }
            let rel = info.relativePath(of: chunked.file)
            try FS.unlink(store.stagingDir(c.releaseID) + "/" + rel)
            spare?.present[n] = false
            spare?.touched.insert(SpareTree.parent(rel.utf8))
        }
        if let spare { log(.info, "building on the spare tree: \(spare.present.reduce(0) { $1 ? $0 + 1 : $0 }) of \(plan.files.release.count) files in place") }
        let durable = try place(plan, fetched: fetched, chunks: chunks, rebuiltDir: store.fetchedDir(c.manifest.archiveDigest),
                                moveFetched: moveFetched, inPlace: spare?.present) { TreeLinks.Place(root: roots[Int($0.group)], path: $0.path) }
        try store.sealStaging(c.releaseID, info, installed: plan.files.release, durable: durable, spare: spare,
                              synced: try syncBehind?.finish() ?? [])
    }

    /// Puts the plan's files at `target(file)`, each as `assemble` says; returns which files of
    /// the list the plan was made from (`plan.files.release`, by number) are durable already
    /// (links to installed files). Chunked files are rebuilt into `rebuiltDir` (the update's
    /// fetched files) and linked from there. `target` is asked on several threads.
    /// `inPlace`: by number in `plan.files.release`, files already at their place (a spare
    /// tree's), counted as reused and durable.
    func place(_ plan: FilePlan, fetched: (ManifestFile) -> String?, chunks: [String: String] = [:], rebuiltDir: String, moveFetched: Bool = false,
               inPlace: [Bool]? = nil, target: (ManifestFile) -> TreeLinks.Place) throws -> [Bool] {
        let files = plan.files
        let totalBytes = files.reduce(UInt64(0)) { $0 + $1.file.size } + plan.chunked.reduce(UInt64(0)) { $0 + $1.file.size }
        let filesTotal = UInt64(files.count + plan.chunked.count)
        var bytesDone: UInt64 = 0
        var madeDirs = Set<[UInt8]>()  // as bytes: Strings equal by canonical equivalence are other names on disk
        var durable = [Bool](repeating: false, count: files.release.count)
        var chunks = chunks  // linked chunks decoded by a rebuild join it for the later places
        /// Fetched files moved into the release whose content another file of it takes too:
        /// their paths in it, by content (`moveFetched`). Only for contents taken more than once:
        /// one entry per file was 36 MB at 100,000 files.
        var moved: [Sha256: String] = [:]
        var counts = InstallCounts(progress: progress, bytesTotal: totalBytes, filesTotal: filesTotal)
        counts.report(0, files: 0)
        // Where each file goes is a shared root and its own path: a directory's path is made
        // once, where the one before it is another.
        func isInPlace(_ i: Int) -> Bool {
            guard let inPlace else { return false }
            let n = files.releaseIndex(i)
            return n < inPlace.count && inPlace[n]
        }
        var previous: TreeLinks.Place?
        for (i, (f, _)) in files.enumerated() where !isInPlace(i) {
            let t = target(f)
            defer { previous = t }
            if let previous, t.sharesDirectory(with: previous) { continue }
            let dir = t.directoryPath
            if madeDirs.insert(Array(dir.utf8)).inserted { try FS.makeDirectories(dir) }
        }
        // Files on disk first, linked a directory at a time on several threads; what can't be
        // linked is copied below.
        let linked = try TreeLinks.make(files.count, cancel: cancel, link: { i in
            if isInPlace(i) { return nil }
            let (f, origin) = files[i]
            switch origin {
            case let .installed(file): return TreeLinks.Link(source: file.place, target: target(f), size: f.size)
            case let .fetched(path): return TreeLinks.Link(source: TreeLinks.Place(root: "", path: path), target: target(f), size: f.size)
            case .archive, .bundle: return nil
            }
        }) { files, bytes in counts.report(bytes, files: files) }
        var filesDone = 0
        for i in files.indices where linked[i] || isInPlace(i) {
            let (f, origin) = files[i]
            // A file in place (a spare tree's) is a link made before, to a durable file.
            let kept = !linked[i]
            if case .installed = origin { durable[files.releaseIndex(i)] = true }
            if kept { durable[files.releaseIndex(i)] = true }
            if origin.isOnDisk || kept { counts.reuse(f.size) }
            bytesDone += f.size
            filesDone += 1
        }
        counts.report(bytesDone, files: filesDone)
        let takenTwice = moveFetched ? Installer.repeated(files.indices.compactMap { i in
            if !linked[i] && !isInPlace(i), case .archive = files[i].source { return files[i].file.digest }
            return nil
        }) : []
        for i in files.indices where !linked[i] && !isInPlace(i) {
            let (f, origin) = files[i]
            try cancel.check()
            let target = target(f).full
            switch origin {
            case let .installed(file):
                try copyVerified(file.place.full, to: target, f)
            case let .fetched(path):
                try copyVerified(path, to: target, f)
            case .archive:
                guard let path = fetched(f) else { throw AssetPatchError(.internal, "\"\(f.path)\" was planned but not fetched") }
                // Content moved already for another path is linked (or copied) from there.
                let first = moved[f.digest]
                let source = first ?? path
                if first == nil, moveFetched, move(source, to: target, size: f.size) {
                    if takenTwice.contains(f.digest) { moved[f.digest] = target }
                } else if !link(source, to: target, size: f.size) {
                    try copyVerified(source, to: target, f)
                }
            case let .bundle(path):
                try copyVerified(path, to: target, f)
            }
            if origin.isOnDisk { counts.reuse(f.size) }
            bytesDone += f.size
            filesDone += 1
            counts.report(bytesDone, files: filesDone)
        }
        let lastUses = Installer.lastUses(plan.chunked)
        for (i, chunked) in plan.chunked.enumerated() {
            try cancel.check()
            let place = target(chunked.file)
            let target = place.full
            if madeDirs.insert(Array(place.directoryPath.utf8)).inserted { try FS.makeDirectories(place.directoryPath) }
            let base = bytesDone
            let rebuilt = try rebuild(plan.chunked, i, into: rebuiltDir, chunks: &chunks, lastUses: lastUses) { [counts] done in
                counts.report(base + done, files: plan.files.count + i)
            }
            if link(rebuilt, to: target, size: chunked.file.size) {
                syncBehind?.submit(rebuilt)
            } else {
                try copyVerified(rebuilt, to: target, chunked.file)
            }
            counts.reused.bytes += chunked.chunks.reduce(UInt64(0)) { sum, c in
                if case .local = c.1 { return sum + UInt64(c.0.size) }
                return sum
            }
            bytesDone += chunked.file.size
        }
        counts.report(bytesDone, files: Int(filesTotal), final: true)
        return durable
    }

    /// The digests `digests` holds more than once.
    static func repeated(_ digests: [Sha256]) -> Set<Sha256> {
        var out = Set<Sha256>()
        let sorted = digests.sorted()
        for i in sorted.indices.dropFirst() where sorted[i] == sorted[i - 1] { out.insert(sorted[i]) }
        return out
    }

    /// Copies `source` to `target` (read-only), sharing extents where the filesystem can
    /// (FICLONE: btrfs, XFS), and checks size and sha256 of what was written.
    private func copyVerified(_ source: String, to target: String, _ f: ManifestFile) throws {
        let mismatch = { (what: String) in DifferentialFallback(message: "\(source): \(what), expected for \"\(f.path)\"") }
        guard let input = try? File.openRead(source) else { throw mismatch("can't be read") }
        let out = try File.open(target, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o444)
        let digest = try Digest(.sha256)
        var size: UInt64 = 0
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        // FICLONE = _IOW(0x94, 9, int): the copy shares the source's extents (copy on write).
        let cloned = ioctl(out.fd, 0x4004_9409, input.fd) == 0
        let reader = cloned ? out : input
        while true {
            try cancel.check()
            let n = try reader.pread(into: buffer, at: size)
            if n == 0 { break }
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            if !cloned { try out.pwrite(chunk, at: size) }
            digest.update(chunk)
            size += UInt64(n)
            if size > f.size { break }
        }
        if !cloned { out.startWriteback() }
        let sha = digest.finalHex()
        if size != f.size || sha != f.sha256 {
            try? FS.unlink(target)
            throw mismatch(size != f.size ? "has another size" : "has sha256 \(sha)")
        }
        syncBehind?.submit(target, waiting: true)
    }

    /// Hard-links an installed file into the staging release. False (the entry is extracted from
    /// the archive instead) when the link fails (another filesystem, EMLINK) or the file is not
    /// the regular, read-only file of the recorded size it should be.
    func link(_ source: String, to target: String, size: UInt64) -> Bool {
        isSealedFile(source, size: size) && Glibc.link(source, target) == 0
    }

    /// Renames a fetched file into the release (no link to remove afterwards).
    func move(_ source: String, to target: String, size: UInt64) -> Bool {
        isSealedFile(source, size: size) && Glibc.rename(source, target) == 0
    }

    /// A read-only regular file (not a link) of `size` bytes: what the store writes and verifies.
    private func isSealedFile(_ path: String, size: UInt64) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0 && TreeLinks.isSealed(st, size: size)
    }

    /// The entries to extract, in data order. Format 1: exactly the manifest's files. Legacy:
    /// the archive's own declarations, bounded here since the manifest declares nothing.
    private func checkedEntries(_ zip: ZipReader, _ c: Candidate) throws -> [ZipEntry] {
        if !c.manifest.isLegacy { return try zip.fileEntries(matching: c.manifest.files) }
        let entries = zip.fileEntries
        var sum: UInt64 = 0
        for e in entries {
            let (s, o) = sum.addingReportingOverflow(e.uncompressedSize)
            if o || s > maxReleaseBytes {
                throw AssetPatchError(.archive, "\(c.archive.shown): entries declare more than max_release_bytes (\(maxReleaseBytes)) unpacked")
            }
            sum = s
        }
        if let conflict = ResourceName.fileDirectoryConflict(in: Set(entries.map(\.name))) {
            throw AssetPatchError(.archive, "\(c.archive.shown): \"\(conflict)\" is both a file and a directory")
        }
        return entries
    }
}

/// An install's counts as progress reports them: what is done, and of it what came from disk.
private struct InstallCounts {
    let progress: ProgressReporter
    let bytesTotal: UInt64
    let filesTotal: UInt64
    var reused = (files: UInt64(0), bytes: UInt64(0))

    mutating func reuse(_ size: UInt64) {
        reused.files += 1
        reused.bytes += size
    }

    func report(_ bytes: UInt64, files: Int, final: Bool = false) {
        progress.report(Progress(phase: .install, bytesDone: bytes, bytesTotal: bytesTotal, filesDone: UInt64(files),
                                 filesTotal: filesTotal, reused: reused), final: final)
    }
}

extension ReleaseRecord {
    /// The record of candidate `c` installed with `files`.
    init(_ c: Candidate, files: [ManifestFile]) {
        self.init(version: c.version, files: files, plugins: c.manifest.plugins, signatureVerified: c.manifest.signatureVerified,
                  archiveDigest: c.manifest.archiveDigest, label: c.manifest.label)
        created = c.manifest.created
        notes = c.manifest.notes
        mandatory = c.manifest.mandatory
        minAppVersion = c.manifest.minAppVersion
        maxAppVersion = c.manifest.maxAppVersion
        indexRoot = c.manifest.index?.root
        channel = c.manifest.channel
        rolloutBasisPoints = c.manifest.rollout.map { Rollout.basisPoints($0.percent(at: unixTime())) }
        groups = c.index?.groups?.groups ?? []
        bundleCopies = c.bundleCopies
        groupFetchBytes = c.groupFetchBytes
        if let index = c.manifest.index, let size = c.manifest.archiveSize {
            (archiveURL, archiveSize, self.index) = (c.archive.url, size, index)
        }
    }
}
