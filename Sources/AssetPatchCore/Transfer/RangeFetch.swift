import Glibc

/// Fetches a differential plan's ranges of the archive into `downloads/<digest>.files/`: from
/// the file for file:// archives, with up to `parallel_downloads` range requests at once over
/// HTTP(S). Each range's bytes go through a `RangeReceiver` as they arrive, so every file is
/// inflated, hashed and kept (or refused) on the way. Nothing the server says about lengths is
/// trusted: a 206 must carry exactly the range asked for, and a receiver takes no byte beyond it.
final class RangeFetch {
    let source: Location
    let archiveSize: UInt64
    let dir: String
    let http: HTTPClient
    let parallel: Int
    let cancel: CancelToken
    /// nil: no progress reports (reading the rest of a downloaded archive).
    let progress: ProgressReporter?
    /// The repository's sources: with more than one, ranges are spread over them (`SourceSpread`).
    let sources: Sources?
    /// Where each verified file is handed over to be made durable while the rest arrives.
    let syncBehind: SyncBehind?

    /// Bytes received in this attempt, and what was left of the plan when it started: progress.
    private var received: UInt64 = 0
    private var base: UInt64 = 0
    /// What was fetched and verified, by sha256 (kept by the consumers' workers).
    private let kept: Locked<[String: String]>
    var fetched: [String: String] { kept.withLock { $0 } }
    /// Contents verified and kept in `dir` under their sha256 before this fetch (left out).
    let inDir: Set<Sha256>

    /// `fetched`: files kept already (by sha256), and `inDir`: contents kept already in `dir`
    /// under their sha256; both left out of every attempt.
    init(source: Location, archiveSize: UInt64, dir: String, http: HTTPClient, parallel: Int, cancel: CancelToken,
         progress: ProgressReporter?, fetched: [String: String] = [:], inDir: Set<Sha256> = [], sources: Sources? = nil,
         syncBehind: SyncBehind? = nil) {
        kept = Locked(fetched)
        self.inDir = inDir
        self.syncBehind = syncBehind
        self.sources = sources
        self.source = source
        self.archiveSize = archiveSize
        self.dir = dir
        self.http = http
        self.parallel = parallel
        self.cancel = cancel
        self.progress = progress
    }

    /// The plan's ranges still to fetch: entries fetched by earlier attempts are left out and the
    /// rest coalesced again.
    func remaining(_ plan: FilePlan) -> [FetchRange] {
        let fetched = self.fetched
        let left = plan.ranges.flatMap(\.entries).filter { !inDir.contains($0.digest) && fetched[$0.sha256] == nil }
        return FilePlan.coalesce(left, gap: FilePlan.coalesceGap, maxRequest: FilePlan.maxRequestBytes)
    }

    /// Where the content of `f` was kept, by this fetch or before it (`inDir`).
    func path(of f: ManifestFile) -> String? {
        inDir.contains(f.digest) ? dir + "/" + f.sha256 : kept.withLock { $0[f.sha256] }
    }

    /// One attempt at the ranges not fetched yet.
    func attempt(_ plan: FilePlan) throws {
        try FS.makeDirectories(dir)
        let ranges = remaining(plan)
        guard !ranges.isEmpty else { return }
        received = 0
        base = plan.fetchBytes - min(plan.fetchBytes, ranges.reduce(0) { $0 + $1.count })
        let report: () -> Void = {
            self.progress?.report(Progress(phase: .download, bytesDone: min(self.base + self.received, plan.fetchBytes), bytesTotal: plan.fetchBytes,
                                          filesDone: UInt64(self.kept.withLock { $0.count }), filesTotal: UInt64(plan.fetchEntries)))
        }
        let receivers = ranges.map { r in
            RangeReceiver(r, dir: dir, shown: source.shown) { f, path in
                self.kept.withLock { $0[f.sha256] = path }
                self.syncBehind?.submit(path)
            }
        }
        try drive(receivers, report)
    }

    /// Fetches each consumer's range (read from a file:// archive, or requested over HTTP, up
    /// to `parallel` at once) and pushes its bytes to it as they arrive; the consumers' work runs
    /// on worker threads (`ConsumerWorkers`), so callbacks they make must be thread-safe.
    func drive(_ consumers: [any RangeConsumer], _ report: () -> Void) throws {
        guard !consumers.isEmpty else { return report() }
        let workers = ConsumerWorkers(transfers: min(consumers.count, max(parallel, 2)))
        defer { workers.stop() }
        let consumers = consumers.map(workers.wrap)
        defer { for r in consumers { r.abandon() } }
        do {
            try run(consumers, report)
        } catch {
            // Bytes that failed their checks on a worker are the reason, not a connection that
            // failed after them (a cancellation or a refusal stays what it is).
            for r in consumers { r.abandon() }
            if let failure = workers.firstFailure, (error as? AssetPatchError)?.transient == true { throw failure }
            throw error
        }
    }

    private func run(_ consumers: [any RangeConsumer], _ report: () -> Void) throws {
        switch source {
        case let .file(path, _):
            try readLocal(path, consumers, report)
        case .http where spreads:
            let archiveSize = archiveSize
            let spread = SourceSpread(sources: sources!, locations: remoteLocations, archiveSize: archiveSize, http: http, parallel: parallel,
                                      judge: { head, r, shown in try RangeFetch.judge(head, r, archiveSize: archiveSize, shown: shown) },
                                      onBytes: { self.received += $0 })
            defer { for r in spread.made { r.abandon() } }
            try spread.run(consumers, progress: report)
        case let .http(url):
            // The bytes from `start` to the range's end, into the consumer that has those
            // before them: a request held through a long pause goes on from where it stopped.
            func request(_ r: any RangeConsumer, from start: UInt64) -> HTTPClient.Request? {
                guard start < r.range.end else { return nil }  // all of it arrived
                let rest = FetchRange(start: start, end: r.range.end, entries: [])
                return HTTPClient.Request(extraHeaders: ["Range: bytes=\(start)-\(r.range.end - 1)"],
                                          onHead: { head in try self.judge(head, rest) },
                                          sink: { chunk in
                                              try r.push(chunk)
                                              self.received += UInt64(chunk.count)
                                          },
                                          onEnd: { try r.finish() },
                                          continuation: { n in request(r, from: start + n) })
            }
            try http.getBatch(url, consumers.compactMap { request($0, from: $0.range.start) }, parallel: parallel, progress: report)
        }
        report()
    }

    /// The archive on each source that serves it over http(s).
    private var remoteLocations: [Location?] {
        (sources?.locations(for: source) ?? [source]).map { l in l.flatMap { $0.isFile ? nil : $0 } }
    }

    /// More than one source serves the archive: ranges are spread over them.
    /// (A transport of the host's own runs one request at a time, through its own stack: the
    /// ranges then fail over source by source, not spread.)
    private var spreads: Bool {
        (sources?.count ?? 1) > 1 && http.settings.transport == nil && remoteLocations.compactMap { $0 }.count > 1
    }

    /// Bytes received by the last `drive` (progress of another planner's ranges).
    var receivedBytes: UInt64 { received }

    private func readLocal(_ path: String, _ receivers: [any RangeConsumer], _ report: () -> Void) throws {
        let file = try File.openRead(path)
        let size = try file.size()
        if size != archiveSize {
            throw DifferentialFallback(message: "\(source.shown): archive is \(size) bytes, the manifest says \(archiveSize)")
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        for r in receivers {
            var offset = r.range.start
            while offset < r.range.end {
                try cancel.check()
                let want = Int(min(UInt64(buffer.count), r.range.end - offset))
                let n = try file.pread(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
                if n == 0 { break }
                try r.push(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                offset += UInt64(n)
                received += UInt64(n)
                report()
            }
            try r.finish()
        }
    }

    private func judge(_ head: ResponseHead, _ r: FetchRange) throws {
        try RangeFetch.judge(head, r, archiveSize: archiveSize, shown: source.shown)
    }

    /// A range response must be a 206 of exactly the bytes asked for, of an archive of the
    /// manifest's size, without a content coding. A 200 means the server ignores ranges.
    static func judge(_ head: ResponseHead, _ r: FetchRange, archiveSize: UInt64, shown: String) throws {
        let what = "GET \(shown) bytes \(r.start)-\(r.end - 1)"
        switch head.status {
        case 206:
            if let coding = head.header("Content-Encoding"), coding.lowercased() != "identity" {
                throw DifferentialFallback(message: "\(what): the range came with Content-Encoding \(coding)")
            }
            guard let cr = head.header("Content-Range"), let range = ContentRange.parse(cr),
                  range.start == r.start, range.end == r.end - 1, range.total == archiveSize else {
                throw DifferentialFallback(message: "\(what): HTTP 206 with Content-Range \(head.header("Content-Range") ?? "(none)")")
            }
            if let length = head.contentLength, length != r.count {
                throw DifferentialFallback(message: "\(what): HTTP 206 with Content-Length \(length)")
            }
        case 200:
            throw DifferentialFallback(message: "\(what): the server ignores ranges (HTTP 200)")
        case 416:
            throw DifferentialFallback(message: "\(what): HTTP 416 (the archive is shorter than the manifest says)")
        default:
            throw HTTPClient.statusError(head, what)
        }
    }
}
