import Glibc

/// The hard links that put files already on disk into a release being built, made a directory
/// at a time on several threads. An update that changes one file of 100,000 still builds a
/// complete tree (hosts read a release as a plain directory, `..` included), so linking is most
/// of its work: by directory, each link is one `fstatat` and one `linkat` relative to open
/// directories (no walk of the full paths), and directories are linked in parallel, which the
/// file system takes as independent (each locks only its own directory). A file is named by a
/// root its release shares and its own path, so 100,000 links cost no String of their own.
struct TreeLinks {
    /// A file named by a root many share and its own path (`FilePlace`).
    typealias Place = FilePlace

    /// The source must be a sealed file (`isSealed`) of `size` bytes.
    struct Link {
        let source: Place
        let target: Place
        let size: UInt64
    }

    /// Links of fewer files are made on the calling thread alone.
    static let parallelFrom = 256

    /// Makes the links `link(0..<count)` gives (nil: not a link) whose target's directory
    /// exists; returns for each index whether its link was made (not: a source that is not
    /// sealed, another file system, EMLINK; the caller copies those). `link` is asked on
    /// several threads, so that no list of 100,000 links is ever made.
    /// `progress(files, bytes)` (linked so far) is called on the calling thread only: after each
    /// directory it did, and once at the end with the totals (the other threads may have taken
    /// every directory).
    static func make(_ count: Int, cancel: CancelToken, link: (Int) -> Link?, progress: (Int, UInt64) -> Void) throws -> [Bool] {
        // Runs of links into one directory (a plan in path order has each directory's files
        // together; a directory split in runs is linked in parts, as correctly).
        var runs: [Range<Int>] = []
        var made = [Bool](repeating: false, count: count)
        var last: Place?
        var links = 0
        for i in 0..<count {
            guard let l = link(i) else { continue }
            made[i] = true
            links += 1
            if let last, l.target.sharesDirectory(with: last) {
                runs[runs.count - 1] = runs[runs.count - 1].lowerBound..<(i + 1)
            } else {
                runs.append(i..<(i + 1))
            }
            last = l.target
        }
        let failed = Locked<[Int]>([])
        let linked = Locked((files: 0, bytes: UInt64(0)))
        let caller = pthread_self()
        let threads = links >= parallelFrom ? min(availableProcessors(), FS.syncThreads) : 1
        try parallelForEach(runs.count, threads: threads) { r in
            try cancel.check()
            let done = self.link(runs[r], link)
            if !done.missed.isEmpty { failed.withLock { $0 += done.missed } }
            let total = linked.withLock { n in
                n.files += done.files
                n.bytes += done.bytes
                return n
            }
            if pthread_equal(pthread_self(), caller) != 0 { progress(total.files, total.bytes) }
        }
        let total = linked.withLock { $0 }
        progress(total.files, total.bytes)
        for i in failed.withLock({ $0 }) { made[i] = false }
        return made
    }

    /// Makes the links of `run`, all into one directory; returns those not made, and the files
    /// and bytes linked.
    private static func link(_ run: Range<Int>, _ link: (Int) -> Link?) -> (missed: [Int], files: Int, bytes: UInt64) {
        var missed: [Int] = []
        var (files, bytes) = (0, UInt64(0))
        var target: Int32 = -2
        defer { if target >= 0 { close(target) } }
        var sourceOf: Place?
        var source: Int32 = -1
        defer { if source >= 0 { close(source) } }
        for i in run {
            guard let l = link(i) else { continue }
            if target == -2 { target = Glibc.open(l.target.directoryPath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            guard target >= 0 else {
                missed.append(i)
                continue
            }
            if sourceOf.map({ !l.source.sharesDirectory(with: $0) }) ?? true {
                if source >= 0 { close(source) }
                source = Glibc.open(l.source.directoryPath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                sourceOf = l.source
            }
            var st = stat()
            let made = source >= 0 && withCName(l.source.name) { from in
                fstatat(source, from, &st, AT_SYMLINK_NOFOLLOW) == 0 && isSealed(st, size: l.size)
                    && withCName(l.target.name) { to in linkat(source, from, target, to, 0) == 0 }
            }
            if made {
                files += 1
                bytes += l.size
            } else {
                missed.append(i)
            }
        }
        return (missed, files, bytes)
    }

    /// `name` NUL-terminated, on the stack (a file name is at most 255 bytes); false for an
    /// empty name or one holding NUL.
    private static func withCName(_ name: Substring.UTF8View, _ body: (UnsafePointer<CChar>) -> Bool) -> Bool {
        let n = name.count
        guard n > 0, n < 4096 else { return false }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: n + 1) { buffer in
            var i = 0
            for b in name {
                guard b != 0 else { return false }
                buffer[i] = CChar(bitPattern: b)
                i += 1
            }
            buffer[n] = 0
            return body(UnsafePointer(buffer.baseAddress!))
        }
    }

    /// A read-only regular file (not a link) of `size` bytes: what the store writes and verifies.
    static func isSealed(_ st: stat, size: UInt64) -> Bool {
        (st.st_mode & S_IFMT) == S_IFREG && (st.st_mode & 0o222) == 0 && UInt64(st.st_size) == size
    }
}
