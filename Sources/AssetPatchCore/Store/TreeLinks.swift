import Glibc

/// The hard links that put files already on disk into a release being built, made a directory
/// at a time on several threads. An update that changes one file of 100,000 still builds a
/// complete tree (hosts read a release as a plain directory, `..` included), so linking is most
/// of its work: by directory, each link is one `fstatat` and one `linkat` relative to open
/// directories (no walk of the full paths), and directories are linked in parallel, which the
/// file system takes as independent (each locks only its own directory).
struct TreeLinks {
    /// Full paths; the source must be a sealed file (`isSealed`) of `size` bytes.
    struct Link {
        let source: String
        let target: String
        let size: UInt64
    }

    /// Links of fewer files are made on the calling thread alone.
    static let parallelFrom = 256

    /// Makes each link whose target's directory exists; returns the indices of those not made
    /// (a source that is not sealed, another file system, EMLINK), for the caller to copy.
    /// `progress(files, bytes)` (linked so far) is called on the calling thread only: after each
    /// directory it did, and once at the end with the totals (the other threads may have taken
    /// every directory).
    static func make(_ links: [Link], cancel: CancelToken, progress: (Int, UInt64) -> Void) throws -> [Int] {
        var directories: [String] = []
        var members: [[Int]] = []
        var byDirectory: [String: Int] = [:]
        for (i, l) in links.enumerated() {
            let dir = l.target.beforeLastSlash ?? "."
            if let d = byDirectory[dir] {
                members[d].append(i)
            } else {
                byDirectory[dir] = directories.count
                directories.append(dir)
                members.append([i])
            }
        }
        byDirectory = [:]
        let failed = Locked<[Int]>([])
        let linked = Locked((files: 0, bytes: UInt64(0)))
        let caller = pthread_self()
        let threads = links.count >= parallelFrom ? min(availableProcessors(), FS.syncThreads) : 1
        try parallelForEach(directories.count, threads: threads) { d in
            try cancel.check()
            let missed = link(members[d], of: links, into: directories[d])
            if !missed.isEmpty { failed.withLock { $0 += missed } }
            let bytes = members[d].reduce(UInt64(0)) { $0 + links[$1].size } - missed.reduce(UInt64(0)) { $0 + links[$1].size }
            let total = linked.withLock { n in
                n.files += members[d].count - missed.count
                n.bytes += bytes
                return n
            }
            if pthread_equal(pthread_self(), caller) != 0 { progress(total.files, total.bytes) }
        }
        let total = linked.withLock { $0 }
        progress(total.files, total.bytes)
        return failed.withLock { $0.sorted() }
    }

    /// Links `which` of `links`, all in `directory`; returns those not made.
    private static func link(_ which: [Int], of links: [Link], into directory: String) -> [Int] {
        let target = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard target >= 0 else { return which }
        defer { close(target) }
        var missed: [Int] = []
        var sourceDirectory: String?
        var source: Int32 = -1
        defer { if source >= 0 { close(source) } }
        for i in which {
            let l = links[i]
            guard let (dir, name) = split(l.source), let (_, targetName) = split(l.target) else {
                missed.append(i)
                continue
            }
            if dir != sourceDirectory {
                if source >= 0 { close(source) }
                source = Glibc.open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                sourceDirectory = dir
            }
            var st = stat()
            guard source >= 0, fstatat(source, name, &st, AT_SYMLINK_NOFOLLOW) == 0, isSealed(st, size: l.size),
                  linkat(source, name, target, targetName, 0) == 0 else {
                missed.append(i)
                continue
            }
        }
        return missed
    }

    /// A read-only regular file (not a link) of `size` bytes: what the store writes and verifies.
    static func isSealed(_ st: stat, size: UInt64) -> Bool {
        (st.st_mode & S_IFMT) == S_IFREG && (st.st_mode & 0o222) == 0 && UInt64(st.st_size) == size
    }

    private static func split(_ path: String) -> (String, String)? {
        let bytes = path.utf8
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")), bytes.index(after: slash) < bytes.endIndex else { return nil }
        return (String(decoding: bytes[..<slash], as: UTF8.self), String(decoding: bytes[bytes.index(after: slash)...], as: UTF8.self))
    }
}
