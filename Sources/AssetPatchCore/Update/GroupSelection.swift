extension Updater {
    /// Which groups of a release (by number: 0 the base, N the Nth group) an update installs:
    /// the base, every install group, the on-demand groups the host wants with every update
    /// (the `groups` option), and every on-demand group the active release has content of on
    /// disk: one it lists as fetched (by name), and one with a file at a path the active
    /// release has (a release from before groups had every file; a group that was installed
    /// with every update, or renamed, keeps its files). Those move forward differentially: only
    /// their changed files and chunks are fetched. The others stay absent until the host
    /// fetches them; `check` plans the same. `paths`: the release's files, in its order.
    func groupsInstalled(_ table: GroupTable, paths: [String], _ state: StoreState) -> [Bool] {
        let active = state.active
        let carried = Set(active.map { state.groups.local[$0.id] ?? [] } ?? []).union(config.groups)
        var take = [true] + table.groups.map { $0.delivery == .install || carried.contains($0.name) }
        guard let active, take.contains(false), let present = activePaths(active, state) else { return take }
        for (path, g) in zip(paths, table.fileGroups) where !take[Int(g)] && present.contains(path) {
            take[Int(g)] = true
        }
        return take
    }

    /// Which files' chunk lists an update reads: those of the groups it installs.
    func chunksInstalled(_ table: GroupTable, paths: [String], _ state: StoreState) -> (Int) -> Bool {
        let take = groupsInstalled(table, paths: paths, state)
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
        let take = groupsInstalled(table, paths: index.files.map(\.path), state)
        c.manifest.files = index.files.filter { take[Int($0.group)] }
        c.installedGroups = table.groups.enumerated().filter { $0.element.delivery == .onDemand && take[$0.offset + 1] }.map(\.element.name)
    }
}
