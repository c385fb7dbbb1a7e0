extension Updater {
    /// Which of the release's groups an update installs: the base, every install group, the
    /// on-demand groups the host wants with every update (the `groups` option) and those the
    /// active release has on disk (moved forward: only their changed files and chunks are
    /// fetched). The others stay absent until the host fetches them; `check` plans the same.
    func selectGroups(_ c: inout Candidate, _ state: StoreState) {
        guard let index = c.index, let table = index.groups else { return }
        let carried = state.active.map { state.groups.local[$0.id] ?? [] } ?? []
        let wanted = Set(config.groups).union(carried)
        var take = [true]
        for g in table.groups { take.append(g.delivery == .install || wanted.contains(g.name)) }
        c.manifest.files = index.files.filter { take[Int($0.group)] }
        c.installedGroups = table.groups.filter { $0.delivery == .onDemand && wanted.contains($0.name) }.map(\.name)
    }
}
