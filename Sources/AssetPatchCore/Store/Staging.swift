import Glibc

/// Installing a release into the store: built in `staging/<id>`, sealed (record, names file,
/// every file and directory durable), then renamed into `releases/` in one step.
extension Store {
    /// An empty staging directory for release `id` (whatever an earlier attempt left is removed).
    func prepareStaging(_ id: String) throws {
        try FS.removeTree(stagingDir(id))
        try FS.makeDirectories(stagingFilesDir(id))
    }

    /// Writes the release's record and names file into its staging directory, then makes the
    /// staging tree durable before the state may name the release: fdatasync of every file
    /// (their writeback was started as each was written) except those `durable` marks, by
    /// their number in `installed ?? info.files` (hard links to files of installed releases,
    /// whose data was made durable when they were installed),
    /// and fsync of every directory, deepest first (the entries, links included). Only the
    /// release's own bytes are waited for, never what other processes have dirty on the
    /// filesystem (as syncfs would). A failure means the staging directory is discarded and the
    /// step redone from scratch: an interrupted staging directory is never used.
    /// Built on a spare tree (`spare`), only the directories the tree changed and those of
    /// files not in place are synced (the others were durable before the tree was taken).
    /// `synced`: files made durable while the release was built (`SyncBehind`), by identity.
    func sealStaging(_ id: String, _ info: ReleaseRecord, installed: [ManifestFile]? = nil, durable: [Bool] = [],
                     spare: SpareTree.Reconciled? = nil, synced: Set<FileIdentity> = []) throws {
        let stage = stagingDir(id)
        var paths: [String] = []
        func create(_ name: String) throws -> File {
            paths.append(stage + "/" + name)
            return try File.open(stage + "/" + name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o444)
        }
        let record = try create(Store.recordName)
        try info.serialize { try record.write($0) }
        // Written a piece at a time, like the record: at 100,000 files the names are 2.4 MB.
        let names = try create(Store.namesName)
        var piece: [UInt8] = []
        piece.reserveCapacity(66 << 10)
        for f in info.files {
            piece += f.path.utf8
            piece.append(0)
            if piece.count >= 64 << 10 {
                try names.write(piece)
                piece.removeAll(keepingCapacity: true)
            }
        }
        try names.write(piece)
        if let table = info.groupTable { try create(Store.groupTableName).write(table.encode()) }
        if !info.bundleCopies.isEmpty {
            try create(Store.bundleCopiesName).write(Array(info.bundleCopies.map { "\($0.sha256)\t\($0.path)\n" }.joined().utf8))
        }
        if !info.groupFetchBytes.isEmpty {
            try create(Store.groupFetchName).write(Array(info.groupFetchBytes.sorted { $0.key < $1.key }.map { "\($0.value)\t\($0.key)\n" }.joined().utf8))
        }
        // As bytes: names equal as Unicode but not as bytes are other directories on disk.
        var dirs = spare?.touched ?? [Array("files".utf8)]
        dirs.insert([])
        for (i, f) in (installed ?? info.files).enumerated() {
            if let spare, i < spare.present.count, spare.present[i] { continue }
            let rel = info.relativePath(of: f)
            if i >= durable.count || !durable[i] {
                let path = stage + "/" + rel
                // The same file the install's sync thread confirmed is durable (`SyncBehind`).
                if !synced.holds(path) { paths.append(path) }
            }
            var p = SpareTree.parent(rel.utf8)
            while !p.isEmpty, dirs.insert(p).inserted { p = SpareTree.parent(p) }
        }
        let directories = SpareTree.paths(dirs, under: stage)
        try FS.syncFiles(paths, directories: directories)
    }

    func discardStaging(_ id: String) {
        try? FS.removeTree(stagingDir(id))
    }

    /// Moves a sealed staging directory to `releases/<id>` (durably). A leftover directory of
    /// that id that the state does not name is replaced.
    func moveStagingIntoPlace(_ id: String, state: StoreState) throws {
        let target = releaseDir(id)
        if FS.exists(target) {
            if state.liveReleaseIDs.contains(id) {
                throw AssetPatchError(.state, "release \(id) is already installed")
            }
            guard try withExclusiveLease(id, { try FS.removeTree(target) }) else {
                throw AssetPatchError(.busy, "release \(id) is still served by another client of \(root); it can be installed again once that client closes")
            }
        }
        try FS.rename(stagingDir(id), target)
        try FS.syncDirectory(releasesDir)
    }
}
