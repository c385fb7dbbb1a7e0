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
    /// `unlessListed`: not when the state, read again under the lease, lists the group (a
    /// clean-up working from an older state must not delete a group fetched since).
    @discardableResult
    func removeGroup(_ id: String, _ group: String, unlessListed: Bool = false) throws -> Bool {
        let dir = groupDir(id, group)
        guard FS.exists(dir) else { return true }
        return try withExclusiveLease(at: groupLeasePath(id, group)) {
            if unlessListed, try loadState().groups.isLocal(group, in: id) { return }
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
                if (try? removeGroup(id, name, unlessListed: true)) != true { kept += 1 }
            }
        }
        return kept
    }

    /// Groups the state lists as on disk whose directory is gone (a file system that lost it, a
    /// user deleting it) are listed no more: they are fetched again when asked for, instead of
    /// offering missing files to link from. Returns what it dropped, for the log.
    func dropLostGroups(_ state: StoreState) throws -> [String] {
        var lost: [(String, String)] = []
        for (id, names) in state.groups.local {
            for name in names where !FS.isDirectory(groupDir(id, name)) { lost.append((id, name)) }
        }
        guard !lost.isEmpty else { return [] }
        try modifyState { s in
            for (id, name) in lost where !FS.isDirectory(groupDir(id, name)) { s.groups.setLocal(name, in: id, false) }
        }
        return lost.map { "group \($1) of release \($0) is listed but gone from disk: it is fetched again when asked for" }
    }

    // MARK: Fetching a group

    /// What group fetches keep across attempts: `<id>@<group>/files/<sha256>`, `chunks/<sha256>`,
    /// `stage/` (the group's directory being built), and `<id>@<group>.lock`, held by the fetch.
    var groupDownloadsDir: String { downloadsDir + "/groups" }
    func groupDownload(_ id: String, _ group: String) -> String { groupDownloadsDir + "/" + id + "@" + group }

    /// Takes the lock of the fetch of group `group` of release `id` (one fetch of a group at a
    /// time, across processes), waiting while another holds it; `cancel` stops the wait.
    /// `cancel` nil: returns nil at once when another holds it.
    func lockGroupFetch(_ id: String, _ group: String, cancel: CancelToken?) throws -> UpdateLock? {
        try FS.makeDirectories(groupDownloadsDir)
        let path = groupDownload(id, group) + ".lock"
        while true {
            let file = try File.open(path, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o644)
            while flock(file.fd, LOCK_EX | LOCK_NB) != 0 {
                guard errno == EWOULDBLOCK || errno == EAGAIN || errno == EINTR else { throw ioError("flock", file.path) }
                guard let cancel else { return nil }
                try cancel.check()
                usleep(20_000)
            }
            // A clean-up unlinks the lock file under the lock: a lock on an unlinked file is none.
            if Store.isAtPath(file, path) { return UpdateLock(file: file) }
            flock(file.fd, LOCK_UN)
        }
    }

    /// Drops what group fetches kept, except what a fetch running now holds (its lock).
    func discardGroupDownloads(except live: Set<String> = []) {
        for name in (try? FS.list(groupDownloadsDir)) ?? [] where name.hasSuffix(".lock") {
            let base = String(name.dropLast(5))
            if let at = base.firstIndex(of: "@"), live.contains(String(base[..<at])) { continue }
            let path = groupDownloadsDir + "/" + name
            guard let file = try? File.open(path, O_RDWR | O_NOFOLLOW), flock(file.fd, LOCK_EX | LOCK_NB) == 0 else { continue }
            // The lock must be on the file at that name now (a fetch may have unlinked it).
            guard Store.isAtPath(file, path) else { flock(file.fd, LOCK_UN); continue }
            try? FS.removeTree(groupDownloadsDir + "/" + base)
            try? FS.unlink(groupDownloadsDir + "/" + name)
            flock(file.fd, LOCK_UN)
        }
    }
}
