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
        try inShares(files) { try sync($0) }
        if let first = directories.first, let e = FaultInjection.check("fsync") { throw ioError("fsync", first, e) }
        // Directories too: a release of 100,000 files has about 1,000 (no order among them is
        // needed: nothing names the tree until the caller's rename after this returns).
        try inShares(directories) { for path in $0 { try syncDirectory(path) } }
    }

    /// `body` on `items` whole when there are few, else on `syncThreads` contiguous shares at
    /// once; the first error is thrown once every share taken is done.
    private static func inShares(_ items: [String], _ body: (ArraySlice<String>) throws -> Void) throws {
        guard items.count >= 64 else { return try body(items[...]) }
        let n = syncThreads
        try parallelForEach(n, threads: n) { i in try body(items[(items.count * i / n)..<(items.count * (i + 1) / n)]) }
    }

    private static func sync(_ files: ArraySlice<String>) throws {
        for path in files {
            let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            if fd < 0 { throw ioError("open", path) }
            defer { close(fd) }
            if fdatasync(fd) != 0 { throw ioError("fdatasync", path) }
        }
    }
}
