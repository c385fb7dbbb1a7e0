/// What the state records of release groups (`StoreState.groups`): which on-demand groups
/// each installed release has on disk (a group is listed only once its directory is complete
/// and durable), which groups the host pinned (by name: a pin outlives releases), and the
/// order they were last used in, least recent first (what a quota evicts first).
package struct GroupState: Sendable, Equatable {
    package var local: [String: [String]] = [:]
    package var pinned: [String] = []
    package var used: [String] = []

    package init() {}

    package func isLocal(_ group: String, in release: String) -> Bool { local[release]?.contains(group) ?? false }

    mutating func setLocal(_ group: String, in release: String, _ on: Bool) {
        var list = local[release] ?? []
        list.removeAll { $0 == group }
        if on { list.append(group) }
        local[release] = list.isEmpty ? nil : list.sorted()
    }

    /// `group` was used now: last in the eviction order.
    mutating func touch(_ group: String) {
        used.removeAll { $0 == group }
        used.append(group)
    }

    mutating func pin(_ group: String, _ on: Bool) {
        pinned.removeAll { $0 == group }
        if on { pinned.append(group) }
        pinned.sort()
    }

    func toJSON() -> JSON {
        .object([("local", .object(local.sorted { $0.key < $1.key }.map { ($0.key, .array($0.value.map { .string($0) })) })),
                 ("pinned", .array(pinned.map { .string($0) })), ("used", .array(used.map { .string($0) }))])
    }

    static func from(_ json: JSON?) -> GroupState {
        var g = GroupState()
        guard let json, json.isObject else { return g }
        func names(_ j: JSON?) -> [String] { (j?.array ?? []).compactMap { $0.string }.filter(ReleaseGroup.isValidName) }
        for (id, list) in json["local"]?.objectPairs ?? [] where Store.isReleaseID(id) {
            let n = names(list)
            if !n.isEmpty { g.local[id] = n }
        }
        g.pinned = names(json["pinned"])
        g.used = names(json["used"])
        return g
    }
}
