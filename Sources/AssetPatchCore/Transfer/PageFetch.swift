import Glibc

/// Fetches index pages from the archive's `.assetpatch/index` entry: each page's stored bytes
/// lie at a known offset (canonical order), pages next to each other are fetched with one range
/// request, and each page is checked against its reference (`IndexPage.unseal`) and kept in the
/// page store. A server that answers ranges wrongly raises `DifferentialFallback`: the caller
/// then reads the pages from the whole archive, downloaded.
struct PageFetch {
    let source: Location
    let archiveSize: UInt64
    let http: HTTPClient
    let cancel: CancelToken
    let pages: PageStore
    /// The repository's sources: a source that fails gives its pages to the next.
    var sources: Sources? = nil

    /// One page to fetch: its reference and its stored bytes' archive offset.
    struct Wanted {
        var ref: PageRef
        var offset: UInt64
    }

    /// Fetches `wanted` (none already stored); returns the bytes transferred.
    @discardableResult
    func fetch(_ wanted: [Wanted]) throws -> UInt64 {
        let sorted = wanted.sorted { $0.offset < $1.offset }
        // Runs of pages, neighbours (within 4 KiB) sharing one request.
        var runs: [[Wanted]] = []
        for w in sorted {
            if let last = runs.last?.last, w.offset >= last.offset + UInt64(last.ref.compressedSize),
               w.offset - (last.offset + UInt64(last.ref.compressedSize)) <= 4096, runs[runs.count - 1].count < 256 {
                runs[runs.count - 1].append(w)
            } else {
                runs.append([w])
            }
        }
        var moved: UInt64 = 0
        switch source {
        case let .file(path, _):
            let file = try File.openRead(path)
            for run in runs {
                let start = run[0].offset, end = run.last!.offset + UInt64(run.last!.ref.compressedSize)
                guard end <= archiveSize else { throw DifferentialFallback(message: "\(source.shown): the index lies past the archive's end") }
                let bytes = try file.preadExactly(Int(end - start), at: start, what: "index pages")
                try keep(run, bytes, start: start)
                moved += end - start
            }
        case .http:
            var lastError: (any Error)?
            sources?.revive()
            let locations = sources?.locations(for: source) ?? [source]
            var tried = Set<String>()
            for i in sources?.usable() ?? [0] {
                guard case let .http(url)? = locations[i], tried.insert(url).inserted else { continue }
                do {
                    moved += try fetchRemote(url, runs)
                    return moved
                } catch let e as AssetPatchError where [.cancelled, .io, .internal].contains(e.status) || e.released || sources == nil {
                    throw e
                } catch {
                    guard let sources else { throw error }
                    sources.demote(i, SourceSpread.describe(error))
                    lastError = error
                }
            }
            throw lastError ?? AssetPatchError(.network, "no source serves \(source.shown)")
        }
        return moved
    }

    /// The runs by range requests to `url`, each page checked and kept; the bytes moved.
    private func fetchRemote(_ url: String, _ runs: [[Wanted]]) throws -> UInt64 {
        var moved: UInt64 = 0
        var bodies = [[UInt8]](repeating: [], count: runs.count)
        var requests: [HTTPClient.Request] = []
        for (i, run) in runs.enumerated() {
            let start = run[0].offset, end = run.last!.offset + UInt64(run.last!.ref.compressedSize)
            guard end <= archiveSize else { throw DifferentialFallback(message: "\(source.shown): the index lies past the archive's end") }
            let range = FetchRange(start: start, end: end, entries: [])
            requests.append(HTTPClient.Request(extraHeaders: ["Range: bytes=\(start)-\(end - 1)"],
                                               onHead: { try RangeFetch.judge($0, range, archiveSize: archiveSize, shown: source.shown) },
                                               sink: { chunk in
                                                   guard bodies[i].count + chunk.count <= Int(end - start) else {
                                                       throw DifferentialFallback(message: "\(source.shown): more bytes than the index range asked for")
                                                   }
                                                   bodies[i].append(contentsOf: chunk)
                                               },
                                               onEnd: {
                                                   guard bodies[i].count == Int(end - start) else {
                                                       throw AssetPatchError(.network, "\(source.shown): index range cut short", transient: true)
                                                   }
                                               }))
        }
        try http.getBatch(url, requests, parallel: 4) {}
        for (i, run) in runs.enumerated() {
            try keep(run, bodies[i], start: run[0].offset)
            moved += UInt64(bodies[i].count)
        }
        return moved
    }

    /// Checks and stores the pages of one run. A page that does not match its reference after
    /// a range request may be the server's fault (a range of something else): the whole archive,
    /// checked against the head's digest, settles it. Read from an archive on disk, a page that
    /// does not match is the release's fault: `ERR_INTEGRITY`.
    private func keep(_ run: [Wanted], _ bytes: [UInt8], start: UInt64) throws {
        for w in run {
            let at = Int(w.offset - start)
            let stored = Array(bytes[at..<(at + Int(w.ref.compressedSize))])
            let page: [UInt8]
            do { page = try IndexPage.unseal(stored, w.ref, source: source.shown) } catch let e as AssetPatchError where !source.isFile {
                throw DifferentialFallback(message: e.message)
            }
            try pages.save(page, w.ref)
        }
    }
}
