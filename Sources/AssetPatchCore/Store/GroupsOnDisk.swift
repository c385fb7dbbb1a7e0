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

    // MARK: Fetching a group

    /// What group fetches keep across attempts: `<id>@<group>/files/<sha256>`, `chunks/<sha256>`,
    /// `stage/` (the group's directory being built), and `<id>@<group>.lock`, held by the fetch.
    var groupDownloadsDir: String { downloadsDir + "/groups" }
    func groupDownload(_ id: String, _ group: String) -> String { groupDownloadsDir + "/" + id + "@" + group }

    /// Takes the lock of the fetch of group `group` of release `id` (one fetch of a group at a
    /// time, across processes), waiting while another holds it; `cancel` stops the wait.
    func lockGroupFetch(_ id: String, _ group: String, cancel: CancelToken) throws -> UpdateLock {
        try FS.makeDirectories(groupDownloadsDir)
        let path = groupDownload(id, group) + ".lock"
        while true {
            let file = try File.open(path, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o644)
            while flock(file.fd, LOCK_EX | LOCK_NB) != 0 {
                guard errno == EWOULDBLOCK || errno == EAGAIN || errno == EINTR else { throw ioError("flock", file.path) }
                try cancel.check()
                usleep(20_000)
            }
            // A clean-up unlinks the lock file under the lock: a lock on an unlinked file is none.
            var mine = stat(), there = stat()
            if fstat(file.fd, &mine) == 0, lstat(path, &there) == 0, mine.st_ino == there.st_ino, mine.st_dev == there.st_dev {
                return UpdateLock(file: file)
            }
            flock(file.fd, LOCK_UN)
        }
    }

    /// Drops what group fetches kept, except what a fetch running now holds (its lock).
    func discardGroupDownloads(_ id: String? = nil, _ group: String? = nil) {
        for name in (try? FS.list(groupDownloadsDir)) ?? [] where name.hasSuffix(".lock") {
            let base = String(name.dropLast(5))
            if let id, let group, base != id + "@" + group { continue }
            guard let file = try? File.open(groupDownloadsDir + "/" + name, O_RDWR | O_NOFOLLOW),
                  flock(file.fd, LOCK_EX | LOCK_NB) == 0 else { continue }
            try? FS.removeTree(groupDownloadsDir + "/" + base)
            try? FS.unlink(groupDownloadsDir + "/" + name)
            flock(file.fd, LOCK_UN)
        }
    }
}
