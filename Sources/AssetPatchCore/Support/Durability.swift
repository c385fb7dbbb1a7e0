import Glibc
internal import CSystem

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
        FaultInjection.noteSync(files, directories)
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

/// Makes files durable behind the work that completes them, on a thread of its own, so that
/// the file system's journal commits overlap that work instead of all waiting at the end: an
/// update that extracts 1,000 files hands each one over as it is verified, and the release's
/// seal then syncs only what this has not (`FS.syncFiles`). Each round takes every file handed
/// over since the last one, waits until their pages are on disk (their writeback was started
/// as each was written), then fdatasyncs each: the first commit covers the whole round, the
/// others find it done. 1,000 new files' fdatasyncs after their extraction waited nearly all
/// their time on journal commits, the data already on disk.
///
/// A file handed over must be complete and never written again (the store's files are
/// read-only once verified). What was made durable is known by identity (`FileIdentity`:
/// device, inode, size, time), which a rename or a hard link into the release keeps. An
/// fdatasync that fails is thrown by `finish`: after a failed sync a later one on a new
/// descriptor can succeed without the data being on disk, so the failure must not be lost.
package final class SyncBehind: @unchecked Sendable {  // `thread` and `started` under `shared.cond`
    private final class Shared: @unchecked Sendable {  // all access under `cond`
        let cond = Condition()
        var handed: [String] = []
        var stopping = false
        var abandoned = false
        var synced = Set<FileIdentity>()
        var failure: AssetPatchError?
        /// The most files that waited at once (tests).
        var mostWaiting = 0
    }
    private let shared = Shared()
    /// Started by the first file handed over (under `shared.cond`); nil until then, or if it
    /// could not start (the caller's sync then does it all).
    private var thread: pthread_t?
    private var started = false

    package init() {}

    /// Not finished (the install failed or was cancelled): what is left is not synced, and
    /// the thread stops after the slice in hand.
    deinit {
        let s = shared
        s.cond.locked {
            s.abandoned = true
            s.handed.removeAll()
            s.cond.broadcast()
        }
        _ = try? finish()
    }

    /// Most files handed over and not yet taken by a round that a submitter `waiting` adds to:
    /// it waits for the next round beyond it. A fresh install of 100,000 small files kept them
    /// faster than their syncs went, and held every path (24 MB) until the end; the seal waits
    /// for the syncs either way.
    static let maxWaiting = 4096

    /// Hands over the complete file at `path`. Any thread. `waiting`: the caller waits while
    /// `maxWaiting` files wait (a thread of its own: a transfer's receiver that waited on a
    /// slow disk would look stalled to its transfer, and would hold every transfer up).
    package func submit(_ path: String, waiting: Bool = false) {
        let s = shared
        s.cond.locked {
            guard !s.stopping, !s.abandoned else { return }
            if !started {
                started = true
                thread = try? startThread { SyncBehind.run(s) }
            }
            // Without a thread the caller's sync does it all.
            while waiting && thread != nil && s.handed.count >= SyncBehind.maxWaiting && !s.stopping && !s.abandoned { s.cond.wait(until: nil) }
            guard thread != nil, !s.stopping, !s.abandoned else { return }
            s.handed.append(path)
            s.mostWaiting = max(s.mostWaiting, s.handed.count)
            s.cond.broadcast()
        }
    }

    /// The most files handed over that waited for a round at once.
    var mostWaiting: Int { shared.cond.locked { shared.mostWaiting } }

    /// Returns once every file handed over is made durable, with their identities. Throws the
    /// first failed sync; a fault injected on the calling thread for "fdatasync" stands for
    /// them all, as in `FS.syncFiles`. Files handed over after it are ignored.
    package func finish() throws -> Set<FileIdentity> {
        let s = shared
        let t = s.cond.locked { () -> pthread_t? in
            s.stopping = true
            s.cond.broadcast()
            defer { thread = nil }
            return thread
        }
        if let t { pthread_join(t, nil) }
        let (synced, failure) = s.cond.locked { (s.synced, s.failure) }
        if let failure { throw failure }
        if !synced.isEmpty, let e = FaultInjection.check("fdatasync") { throw ioError("fdatasync", "a file of the release", e) }
        return synced
    }

    /// Files of a round opened at once.
    static let slice = 256
    /// How long a round waits for more files after its first, unless `slice` are there: files
    /// arriving one by one would otherwise cost a journal commit each.
    static let gatherMs: UInt64 = 20

    /// A file whose sync failed is removed (if `path` is still that file): its bytes may not be
    /// on disk while the page cache still shows them, so nothing may take it as verified (a
    /// fetched file is fetched again; a staging file goes with its staging directory).
    private static func drop(_ path: String, _ id: FileIdentity) {
        if FileIdentity(path: path) == id { unlink(path) }
    }

    private static func run(_ s: Shared) {
        var round: [String] = []
        while true {
            let go = s.cond.locked { () -> Bool in
                while s.handed.isEmpty && !s.stopping { s.cond.wait(until: nil) }
                let deadline = monotonicMillis() + SyncBehind.gatherMs
                while s.handed.count < SyncBehind.slice && !s.stopping && monotonicMillis() < deadline {
                    s.cond.wait(until: deadline)
                }
                guard !s.handed.isEmpty else { return false }
                swap(&round, &s.handed)
                s.cond.broadcast()  // submitters waiting for room
                return true
            }
            guard go else { return }
            var done: [FileIdentity] = []
            done.reserveCapacity(round.count)
            var failure: AssetPatchError?
            // A slice's files open at once (a round can hold thousands: descriptors are few).
            var fds: [(Int32, String, FileIdentity)] = []
            fds.reserveCapacity(SyncBehind.slice)
            for start in stride(from: 0, to: round.count, by: SyncBehind.slice) {
                if s.cond.locked({ s.abandoned }) { break }
                for path in round[start..<min(start + SyncBehind.slice, round.count)] {
                    // A file moved or removed since is not in the set: the caller's sync has it.
                    let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
                    guard fd >= 0 else { continue }
                    // Its identity before the sync: what the sync covered.
                    guard let id = FileIdentity(fd: fd) else {
                        close(fd)
                        continue
                    }
                    // The wait reports a failed writeback to this descriptor (and to no later
                    // one): it is a failed sync.
                    if csystem_wait_writeback(fd) != 0, errno != ENOSYS, errno != EINVAL, errno != ESPIPE {
                        failure = failure ?? ioError("sync_file_range", path)
                        SyncBehind.drop(path, id)
                        close(fd)
                        continue
                    }
                    fds.append((fd, path, id))
                }
                for (fd, path, id) in fds {
                    if fdatasync(fd) == 0 {
                        done.append(id)
                    } else {
                        failure = failure ?? ioError("fdatasync", path)
                        SyncBehind.drop(path, id)
                    }
                    close(fd)
                }
                fds.removeAll(keepingCapacity: true)
            }
            round.removeAll(keepingCapacity: true)
            s.cond.locked {
                s.synced.formUnion(done)
                if s.failure == nil { s.failure = failure }
            }
        }
    }
}
