import Glibc

/// The data directory is a trust anchor: whoever can write in it can replace the releases the
/// app serves and the plugins it loads (their expected hashes are in the releases' records), and
/// can plant symbolic links that make the library delete or overwrite files elsewhere. So, as
/// OpenSSH does with `~/.ssh`, a data directory and its sub-directories must belong to the
/// user the library runs as (or to root) and be writable by no one else, and the library never
/// follows a symbolic link inside it: sub-directories are checked with lstat, files inside are
/// opened with O_NOFOLLOW, and new files are created with O_EXCL (but for a chunked file being
/// rebuilt, which attempts reopen: never through a link, only a regular file, and every chunk in
/// it hashed again before it counts, `DirectChunks`).
///
/// With those checks a release record can only be changed by the app's own user, who could as
/// well change the app: taking a plugin's hash from it adds no risk that keeping a signed copy of
/// the manifest would remove.
extension Store {
    /// Throws unless `path` is a directory (a symbolic link only where `followLink`) that the
    /// current user or root owns and that group and others can't write.
    static func requireTrusted(_ path: String, _ what: String, followLink: Bool) throws {
        var st = stat()
        let rc = followLink ? stat(path, &st) : lstat(path, &st)
        if rc != 0 { throw ioError("stat", path) }
        let type = st.st_mode & S_IFMT
        if type == S_IFLNK {
            throw AssetPatchError(.io, "\(what) \(path) is a symbolic link: refusing it (the library never follows links inside its data directory)")
        }
        guard type == S_IFDIR else { throw AssetPatchError(.io, "\(what) \(path) is not a directory") }
        let me = geteuid()
        if st.st_uid != me && st.st_uid != 0 {
            throw AssetPatchError(.io, "\(what) \(path) belongs to user \(st.st_uid), not to this user (\(me)) or root: refusing it (whoever owns it can change what the app runs)")
        }
        if st.st_mode & 0o022 != 0 {
            let mode = String(st.st_mode & 0o7777, radix: 8)
            throw AssetPatchError(.io, "\(what) \(path) is writable by group or others (mode \(mode)): refusing it (whoever can write it can change what the app runs); chmod go-w it")
        }
    }

    /// Removes temporary files (`FS.tempName`) left in `dir` by processes no longer running,
    /// and the fixed-name ones of releases up to 0.3, once they are a minute old (a process in
    /// another pid namespace looks gone but may still be writing its file).
    func removeStaleTemporaries(in dir: String) {
        let now = unixTime()
        for name in (try? FS.list(dir)) ?? [] {
            let stale: Bool
            if name.hasSuffix(".tmp") {
                stale = true
            } else if let pid = FS.tempOwner(name), pid > 0 {
                stale = kill(pid, 0) != 0 && errno == ESRCH
            } else {
                continue
            }
            var st = stat()
            if stale, lstat(dir + "/" + name, &st) == 0, now - Int64(st.st_mtim.tv_sec) > 60 { try? FS.unlink(dir + "/" + name) }
        }
    }
}
