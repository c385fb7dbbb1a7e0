import Glibc

/// An on-demand group's directory in a release (`releases/<id>/groups/<name>/`): complete when
/// it is there (a fetch renames it into place after every file and directory in it is durable),
/// listed in the state (`GroupState.local`) only then. Each client that serves files from it
/// holds a shared lease on `leases/<id>@<name>`; it is deleted only under the exclusive lease,
/// so an eviction by one client never pulls files from under another; it then goes at a later
/// clean-up.
extension Store {
    func groupLeasePath(_ id: String, _ group: String) -> String { leasesDir + "/" + id + "@" + group }
    func groupsDir(_ id: String) -> String { releaseDir(id) + "/groups" }

    /// The release's group table for its names file `names`: .some(nil) when it has no groups,
    /// nil when the table can't be read or does not cover the names (read the record then).
    func loadGroupTable(_ id: String, names: [UInt8]) -> GroupTable?? {
        guard FS.exists(groupTablePath(id)) else { return .some(nil) }
        guard let bytes = try? FS.readFile(groupTablePath(id), limit: 64 << 20, followLinks: false),
              let table = try? GroupTable.decode(bytes, files: names.reduce(0) { $0 + ($1 == 0 ? 1 : 0) }, source: groupTablePath(id)) else {
            return nil
        }
        return .some(table)
    }

    /// A shared lease on group `group` of release `id`; nil when its directory is not there.
    func groupLease(_ id: String, _ group: String) throws -> ReleaseLease? {
        try lease(id + "@" + group, at: groupLeasePath(id, group), whileDirectory: groupDir(id, group))
    }

    /// Deletes the group's directory unless a client serves it (then false: a later clean-up
    /// does). The directory is renamed aside first, so it is either complete or gone.
    @discardableResult
    func removeGroup(_ id: String, _ group: String) throws -> Bool {
        let dir = groupDir(id, group)
        guard FS.exists(dir) else { return true }
        return try withExclusiveLease(at: groupLeasePath(id, group)) {
            let aside = groupsDir(id) + "/.removing-" + group
            try FS.removeTree(aside)
            try FS.rename(dir, aside)
            try FS.syncDirectory(groupsDir(id))
            try FS.removeTree(aside)
        }
    }

    /// Deletes the group directories of live releases that the state does not list (evicted
    /// groups a client served then, fetches that crashed before the state named them), except
    /// those a client still serves or a fetch is placing. Returns how many stay for a lease.
    @discardableResult
    func collectGroups(_ state: StoreState) -> Int {
        var kept = 0
        for id in state.liveReleaseIDs {
            for name in (try? FS.list(groupsDir(id))) ?? [] {
                if name.hasPrefix(".removing-") { try? FS.removeTree(groupsDir(id) + "/" + name); continue }
                guard ReleaseGroup.isValidName(name), !state.groups.isLocal(name, in: id) else { continue }
                if (try? removeGroup(id, name)) != true { kept += 1 }
            }
        }
        return kept
    }
}
