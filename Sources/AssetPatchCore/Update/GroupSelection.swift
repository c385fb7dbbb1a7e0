extension Updater {
    /// Which groups of a release (by number: 0 the base, N the Nth group) an update installs:
    /// the base, every install group, the on-demand groups the host wants with every update
    /// (the `groups` option), and every on-demand group the active release has on disk: one it
    /// lists as fetched (by name), and one of which it has files at the same paths making up at
    /// least half the group's bytes (a release from before groups had every file; a group that
    /// was installed with every update, or renamed, keeps its files; a large group that merely
    /// took in one file the release had is not pulled onto every client). Those move forward
    /// differentially: only their changed files and chunks are fetched. The others stay absent
    /// until the host fetches them; `check` plans the same. `files`: the release's, in order.
    func groupsInstalled(_ table: GroupTable, files: [ManifestFile], _ state: StoreState) -> [Bool] {
        let active = state.active
        let carried = Set(active.map { state.groups.local[$0.id] ?? [] } ?? []).union(config.groups)
        var take = [true] + table.groups.map { $0.delivery == .install || carried.contains($0.name) }
        guard let active, take.contains(false) else { return take }
        guard let present = activePaths(active, state) else {
            log(.warning, "the active release's record can't be read: only the groups it lists as fetched move forward")
            return take
        }
        var had = [UInt64](repeating: 0, count: take.count), any = [Bool](repeating: false, count: take.count)
        for (f, g) in zip(files, table.fileGroups) where !take[Int(g)] && present.contains(f.path) {
            had[Int(g)] &+= f.size
            any[Int(g)] = true
        }
        for (i, g) in table.groups.enumerated() where !take[i + 1] && any[i + 1] && had[i + 1] >= g.size - g.size / 2 {
            take[i + 1] = true
        }
        return take
    }

    /// The bytes `max_release_bytes` holds an update to: its base, install groups and the groups
    /// the host wants; groups moved forward because they were on disk were accepted before, and
    /// an update must not fail for them (fetches are held to it one group at a time).
    func judgedBytes(_ c: Candidate) -> UInt64 {
        guard let table = c.index?.groups else { return c.manifest.releaseBytes }
        let wanted = [true] + table.groups.map { $0.delivery == .install || config.groups.contains($0.name) }
        return c.manifest.files.reduce(0) { wanted[Int($1.group)] ? $0 &+ $1.size : $0 }
    }

    /// Which files' chunk lists an update reads: those of the groups it installs.
    func chunksInstalled(_ table: GroupTable, files: [ManifestFile], _ state: StoreState) -> (Int) -> Bool {
        let take = groupsInstalled(table, files: files, state)
        return { take[Int(table.fileGroups[$0])] }
    }

    /// The paths the active release has on disk (its base, install groups and fetched groups),
    /// read from its record once per updater; nil when the record can't be read.
    private func activePaths(_ active: ReleaseRef, _ state: StoreState) -> Set<String>? {
        if let cached = activePathsCache, cached.id == active.id { return cached.paths }
        guard let record = try? store.loadRelease(active.id) else { return nil }
        let local = state.groups.local[active.id] ?? []
        let paths = Set(record.files.filter { record.isPresent($0, local: local) }.map(\.path))
        activePathsCache = (active.id, paths)
        return paths
    }

    /// The base and the groups `groupsInstalled` takes: what an update installs of the release.
    func selectGroups(_ c: inout Candidate, _ state: StoreState) {
        guard let index = c.index, let table = index.groups else { return }
        let take = groupsInstalled(table, files: index.files, state)
        c.manifest.files = index.files.filter { take[Int($0.group)] }
        c.installedGroups = table.groups.enumerated().filter { $0.element.delivery == .onDemand && take[$0.offset + 1] }.map(\.element.name)
    }

    /// The files of groups `c` does not install that the bundle has at the same path with the
    /// same sha256: hashed now (on the update's thread, cached by fingerprint) so that an open
    /// can tell from the cache alone that the bundle may serve them.
    func bundleCopies(_ c: Candidate) throws -> [(path: String, sha256: String)] {
        guard let bundleDir, c.index?.groups != nil else { return [] }
        let installed = Set(c.manifest.files.map(\.path))
        let candidates = c.allFiles.filter { f in
            !installed.contains(f.path) && BundleDigests.Fingerprint(bundleDir + "/" + f.path)?.size == f.size
        }
        guard !candidates.isEmpty else { return [] }
        var digests = BundleDigests(bundleDir: bundleDir, cachePath: store.bundleDigestsPath)
        _ = try digests.digests(sizes: Set(candidates.map(\.size)), cancel: cancel)
        let pairs = candidates.map { (path: $0.path, sha256: $0.sha256) }
        let same = digests.verified(pairs)
        return pairs.filter { same.contains($0.path) }
    }

    /// What fetching each on-demand group `c` does not install would transfer, planned as the
    /// fetch plans it: its files found on disk (in releases kept after this one, the bundle at
    /// any path) or installed by this update are linked, the rest asked for by coalesced
    /// ranges. Chunk lists of absent groups are not read, so a chunked file counts whole: a
    /// fetch that finds some of its chunks on disk transfers less (and reads the chunk lists).
    func groupFetchBytes(_ c: Candidate, _ state: StoreState) throws -> [String: UInt64] {
        guard let table = c.index?.groups else { return [:] }
        let installing = Set(c.manifest.files.map(\.sha256))
        var out: [String: UInt64] = [:]
        for (i, g) in table.groups.enumerated() where g.delivery == .onDemand && !c.installedGroups.contains(g.name) {
            let number = UInt16(i + 1)
            let files = c.allFiles.filter { $0.group == number && !installing.contains($0.sha256) }
            out[g.name] = files.isEmpty ? 0 : try plan(files, chunkLists: [:], chunkSize: 0, state, fetchedChunks: [:])?.fetchBytes ?? g.storedBytes
        }
        return out
    }
}
