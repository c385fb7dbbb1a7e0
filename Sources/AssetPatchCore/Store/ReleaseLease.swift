import Glibc

/// A client's claim on the release it serves: a shared flock(2) on `leases/<id>`, held while the
/// client serves that release. Any client, in any process, deletes a release directory only
/// under the exclusive lock on its lease (`Store.collectGarbage`, which skips a release it
/// can't lock), so another client's update, rollback, reset or clean-up never pulls a release
/// from under a client that still resolves paths into it or runs its plugins. The release goes
/// at the first clean-up after the last client serving it lets go (closes, or serves another).
package final class ReleaseLease: @unchecked Sendable {  // immutable after init; the fd is only closed
    let id: String
    private let file: File

    init(id: String, file: File) {
        self.id = id
        self.file = file
    }

    deinit { flock(file.fd, LOCK_UN) }
}

extension Store {
    var leasesDir: String { root + "/leases" }
    func leasePath(_ id: String) -> String { leasesDir + "/" + id }

    /// Takes a shared lease on release `id`; nil when its directory is gone (a clean-up deleted
    /// it before the lease was taken: the caller reads the state again).
    func lease(_ id: String) throws -> ReleaseLease? {
        try lease(id, at: leasePath(id), whileDirectory: releaseDir(id))
    }

    /// A shared lease on the lock file `path` while `directory` exists (a release's, a group's).
    func lease(_ id: String, at path: String, whileDirectory directory: String) throws -> ReleaseLease? {
        for _ in 0..<8 {
            let file = try File.open(path, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o644)
            if retryingEINTR({ flock(file.fd, LOCK_SH) }) != 0 { throw ioError("flock", file.path) }
            // The lock must be on the file at that name now: a clean-up unlinks the lease file
            // under its exclusive lock, and a lock on an unlinked file protects nothing.
            guard Store.isAtPath(file, path) else { continue }
            guard FS.isDirectory(directory) else {
                flock(file.fd, LOCK_UN)
                return nil
            }
            return ReleaseLease(id: id, file: file)
        }
        throw AssetPatchError(.io, "\(path): the lease keeps being replaced")
    }

    /// Runs `body` (the deletion of release `id`) under the exclusive lock on its lease, then
    /// removes the lease; false, without running it, when a client holds the lease.
    func withExclusiveLease(_ id: String, _ body: () throws -> Void) throws -> Bool {
        try withExclusiveLease(at: leasePath(id), body)
    }

    /// `body` under the exclusive lock on the lease file `path`, which is removed after it.
    func withExclusiveLease(at path: String, _ body: () throws -> Void) throws -> Bool {
        let file = try File.open(path, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o644)
        if flock(file.fd, LOCK_EX | LOCK_NB) != 0 {
            if errno == EWOULDBLOCK || errno == EAGAIN { return false }
            throw ioError("flock", file.path)
        }
        defer { flock(file.fd, LOCK_UN) }
        // Another clean-up may have unlinked the file before this one locked it, and a client
        // then leased a new one at the name: this lock protects nothing; let it be.
        guard Store.isAtPath(file, path) else { return false }
        try body()
        try FS.unlink(file.path)
        return true
    }
}

extension Store {
    /// Whether `file` is the file at `path` now (not one unlinked or replaced since it was opened).
    static func isAtPath(_ file: File, _ path: String) -> Bool {
        var mine = stat(), there = stat()
        return fstat(file.fd, &mine) == 0 && lstat(path, &there) == 0 && mine.st_ino == there.st_ino && mine.st_dev == there.st_dev
    }
}
