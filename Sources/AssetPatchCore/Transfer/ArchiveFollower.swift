import Glibc

/// Extracts the entries of a whole-archive download while it is still arriving, on worker
/// threads, so that downloading (one thread: receive, write, hash the archive) and inflating,
/// hashing and writing the files overlap and use every core.
///
/// The workers read the partial download file behind the downloader, never past the bytes it
/// has written (`advance(to:)`), through the same `RangeReceiver`s a differential update feeds
/// from the network: each entry's local header is checked against the signed manifest's
/// location, its data inflated and hashed, and a file whose size and sha256 match is
/// kept as `downloads/<archive>.files/<sha256>`. Entries are dealt out to the workers in
/// archive order, balanced by size, and each worker skips the bytes of the others' entries.
///
/// Nothing a worker produces is trusted beyond its own hash check, so a worker that meets bytes
/// it can't use (a download restarted under it, a corrupt or truncated archive) simply stops;
/// what it did not keep is extracted from the complete, verified archive afterwards. A kill
/// leaves every file already kept for the next attempt.
final class ArchiveFollower {
    private let path: String
    private let dir: String
    private let shown: String
    private let cancel: CancelToken
    private let syncBehind: SyncBehind?
    private var ranges: [FetchRange]

    private let cond = Condition()
    // Guarded by `cond`.
    private var available: UInt64 = 0
    private var closed = false
    /// The least `available` a waiting worker waits for: the downloader wakes the workers only
    /// once that much is there, so they read in large chunks rather than per network packet.
    private var wakeAt = UInt64.max

    private var threads: [pthread_t] = []
    /// One per worker: written by that worker only, read after it is joined.
    private final class Outcome {
        /// The files kept, by content (each at `dir/<sha256>`): a worker adds no string of its
        /// own, so its thread's heap stays at its buffers whatever the number of files.
        var kept: [Sha256] = []
        var stopped: String?
    }
    private var outcomes: [Outcome]

    /// `entries`: the files to extract, each with its location, disjoint and in archive order.
    /// `syncBehind`: where each file kept is handed over to be made durable.
    init(path: String, entries: [ManifestFile], workers: Int, dir: String, shown: String, cancel: CancelToken, syncBehind: SyncBehind? = nil) {
        self.path = path
        self.syncBehind = syncBehind
        self.dir = dir
        self.shown = shown
        self.cancel = cancel
        ranges = ArchiveFollower.deal(entries, workers: workers)
        outcomes = ranges.map { r in
            let o = Outcome()
            o.kept.reserveCapacity(r.entries.count)
            return o
        }
    }

    deinit { _ = finish() }

    /// The worker count: the processors this process may run on, at most 4 (one thread
    /// downloads; inflating 4 streams outruns any disk).
    static func workerCount() -> Int {
        min(4, availableProcessors())
    }

    /// Splits `entries` into at most `workers` ranges: each entry goes to the worker with the
    /// fewest compressed bytes so far, so all advance at about the download's pace.
    static func deal(_ entries: [ManifestFile], workers: Int) -> [FetchRange] {
        guard !entries.isEmpty else { return [] }
        let n = max(1, min(workers, entries.count))
        var lists = Array(repeating: [ManifestFile](), count: n)
        var load = Array(repeating: UInt64(0), count: n)
        for e in entries {
            let i = load.indices.min { load[$0] < load[$1] }!
            lists[i].append(e)
            load[i] += UInt64(e.location!.range.count)
        }
        return lists.filter { !$0.isEmpty }.map { list in
            FetchRange(start: list.first!.location!.headerOffset, end: list.last!.location!.range.upperBound, entries: list)
        }
    }

    /// Starts the workers; the first `available` bytes of the file are there already (a resume).
    func start(available: UInt64) throws {
        advance(to: available)
        for i in ranges.indices {
            threads.append(try startThread { [self] in work(i) })
        }
    }

    /// The downloader has written the file up to `end` (or truncated it to `end`).
    func advance(to end: UInt64) {
        cond.locked {
            available = end
            if end >= wakeAt {
                wakeAt = .max
                cond.broadcast()
            }
        }
    }

    /// Stops the workers once they have read what is there, joins them and returns what they
    /// kept (by content, each at `dir/<sha256>`: no path each, which at 100,000 files were
    /// 38 MB with their sha256 keys) and why any stopped early.
    func finish() -> (kept: Set<Sha256>, stopped: [String]) {
        cond.locked {
            closed = true
            cond.broadcast()
        }
        for t in threads { pthread_join(t, nil) }
        threads = []
        var all = Set<Sha256>(minimumCapacity: outcomes.reduce(0) { $0 + $1.kept.count })
        for o in outcomes { all.formUnion(o.kept) }
        let stopped = outcomes.compactMap(\.stopped)
        // The update goes on to install: what the workers were given and found is not needed
        // there (a 1,000-file archive's lists are a few hundred KB).
        ranges = []
        outcomes = []
        return (all, stopped)
    }

    /// Bytes a worker reads at a time (128 KiB was no faster: the file is in the page cache).
    static let readSize = 64 << 10

    private func work(_ i: Int) {
        let outcome = outcomes[i]
        let receiver = RangeReceiver(ranges[i], dir: dir, shown: shown) { [syncBehind] f, path in
            outcome.kept.append(f.digest)
            syncBehind?.submit(path, waiting: true)
        }
        defer { receiver.abandon() }
        do {
            var file: File?  // opened once bytes are there: the downloader creates the file
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ArchiveFollower.readSize, alignment: 16)
            defer { buffer.deallocate() }
            while true {
                receiver.skipToNextEntry()
                let offset = receiver.offset
                if offset >= receiver.range.end { break }
                // Wait for a whole read's worth (or the end of this worker's range).
                let target = min(offset + UInt64(buffer.count), receiver.range.end)
                let end = cond.locked { () -> UInt64? in
                    while available < target && !closed {
                        wakeAt = min(wakeAt, target)
                        cond.wait(until: nil)
                    }
                    return available > offset ? available : nil
                }
                guard let end, !cancel.isCancelled else { return }
                let want = Int(min(UInt64(buffer.count), end - offset, receiver.range.end - offset))
                if file == nil { file = try File.openRead(path) }
                let n = try file!.pread(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
                if n == 0 { throw DifferentialFallback(message: "\(shown): the download is shorter than \(end) bytes") }
                try receiver.push(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            }
            try receiver.finish()
        } catch let f as DifferentialFallback {
            outcome.stopped = f.message
        } catch let e as AssetPatchError {
            outcome.stopped = e.message
        } catch {
            outcome.stopped = "\(error)"
        }
    }
}
