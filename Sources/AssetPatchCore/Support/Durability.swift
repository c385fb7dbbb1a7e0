import Glibc

extension FS {
    /// Threads that fdatasync a large set of files together: the file system's journal commits
    /// for many files at once instead of once per file, and the waits overlap.
    static let syncThreads = 4

    /// Makes exactly these files and directories durable: fdatasync of each file (on several
    /// threads when there are many), then fsync of each directory (their entries). Unlike
    /// syncfs, what other processes left dirty on the filesystem is not written, so the cost
    /// depends only on these files, and on how much of them `File.startWriteback` has not
    /// already sent.
    package static func syncFiles(_ files: [String], directories: [String]) throws {
        // A fault a test injects on this thread stands for the whole set.
        if let first = files.first, let e = FaultInjection.check("fdatasync") { throw ioError("fdatasync", first, e) }
        if files.count >= 64 {
            try syncInParallel(files, threads: syncThreads)
        } else {
            try sync(files[...])
        }
        for path in directories { try syncDirectory(path) }
    }

    private static func sync(_ files: ArraySlice<String>) throws {
        for path in files {
            let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            if fd < 0 { throw ioError("open", path) }
            defer { close(fd) }
            if fdatasync(fd) != 0 { throw ioError("fdatasync", path) }
        }
    }

    /// `files` in `threads` contiguous shares, the first on this thread; the first error is
    /// thrown once every share is done.
    private static func syncInParallel(_ files: [String], threads n: Int) throws {
        let failure = Locked<Error?>(nil)
        let shares = (0..<n).map { i in files[(files.count * i / n)..<(files.count * (i + 1) / n)] }
        var started: [pthread_t] = []
        var here = [shares[0]]
        for share in shares.dropFirst() {
            let work = {
                do { try sync(share) } catch { failure.withLock { if $0 == nil { $0 = error } } }
            }
            if let t = try? startThread(work) { started.append(t) } else { here.append(share) }
        }
        for share in here {
            do { try sync(share) } catch { failure.withLock { if $0 == nil { $0 = error } } }
        }
        for t in started { pthread_join(t, nil) }
        if let error = failure.withLock({ $0 }) { throw error }
    }
}
