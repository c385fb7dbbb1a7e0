import Glibc

/// Which file a path or descriptor is, as `stat` tells it: device, inode, size and modification
/// time. A rename or a hard link keeps it; a file written again, or a new file that reuses the
/// inode number of a removed one, does not (its size or time differs).
package struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modified: Int64
    let modifiedNanoseconds: Int64

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modified = Int64(st.st_mtim.tv_sec)
        modifiedNanoseconds = Int64(st.st_mtim.tv_nsec)
    }

    /// The regular file at `path`, not following a final symbolic link; nil for anything else.
    init?(path: String) {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        self.init(st)
    }

    /// The regular file open as `fd`; nil for anything else.
    init?(fd: Int32) {
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        self.init(st)
    }
}

extension Set<FileIdentity> {
    /// Whether the regular file at `path` is one of these (a file made durable behind the work,
    /// `SyncBehind`, and still the same file).
    func holds(_ path: String) -> Bool {
        !isEmpty && FileIdentity(path: path).map(contains) == true
    }
}
