extension Updater {
    /// Whether an update installs group `g`: every install group, the on-demand groups the host
    /// wants with every update (the `groups` option) and those the active release has on disk
    /// (moved forward: only their changed files and chunks are fetched).
    func installs(_ state: StoreState) -> (ReleaseGroup) -> Bool {
        let carried = state.active.map { state.groups.local[$0.id] ?? [] } ?? []
        let wanted = Set(config.groups).union(carried)
        return { $0.delivery == .install || wanted.contains($0.name) }
    }

    /// Which of the release's files an update installs: the base and the groups `installs`
    /// takes. The others stay absent until the host fetches them; `check` plans the same.
    func selectGroups(_ c: inout Candidate, _ state: StoreState) {
        guard let index = c.index, let table = index.groups else { return }
        let installing = installs(state)
        let take = [true] + table.groups.map(installing)
        c.manifest.files = index.files.filter { take[Int($0.group)] }
        c.installedGroups = table.groups.filter { $0.delivery == .onDemand && installing($0) }.map(\.name)
    }
}
