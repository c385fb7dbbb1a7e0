/// Where one file of a new release comes from in a differential update.
enum FileOrigin: Equatable {
    /// A file of an installed release (active, pending or kept): hard-linked.
    case installed(InstalledFile)
    /// A file an earlier, interrupted attempt fetched and verified (`downloads/<archive>.files/`):
    /// hard-linked.
    case fetched(String)
    /// A file of the bundle with the same sha256: copied (cloned where the filesystem can).
    case bundle(String)
    /// Fetched now from the archive with a range request.
    case archive

    /// Taken from an installed release or the bundle, not from bytes an update fetched.
    var isOnDisk: Bool {
        switch self {
        case .installed, .bundle: true
        case .fetched, .archive: false
        }
    }
}

/// One range request: the archive bytes `start..<end`, which hold the local headers and data of
/// `entries` (in archive order) and possibly the bytes of other entries between them.
struct FetchRange: Equatable {
    var start: UInt64
    var end: UInt64
    var entries: [ManifestFile]

    var count: UInt64 { end - start }
}

/// The plan of a differential update: a source for every file of the new release, and the
/// coalesced ranges of the archive to fetch for the rest. Built from the signed manifest's
/// per-file locations; files whose content is on disk already (same sha256) cost no transfer.
struct FilePlan {
    /// Every file of the release, in manifest order, with its source (chunked files rebuilt
    /// from chunks are in `chunked` instead).
    var files: PlannedFiles
    var ranges: [FetchRange]
    /// Chunked files rebuilt chunk by chunk, and the chunk ranges to fetch for them.
    var chunked: [ChunkedFile] = []
    var chunkRanges: [ChunkRange] = []
    /// Chunks an interrupted attempt wrote in place and that still hash right
    /// (`DirectChunks.present`), by `DirectChunks.key`: left out of `chunkRanges`, so that what
    /// the plan says it transfers is what it will. nil: not looked for (a group's fetch).
    var inPlace: [String: String]?
    /// Files made from a delta against an installed file (`DeltaTake`), in the delta file's
    /// order, and that file: its origin in `files` is `.archive` (they join what ranges fetch).
    var deltas: [DeltaTake] = []
    var deltaFile: (location: Location, size: UInt64)?

    /// Neighbouring entries at most this far apart may share one request, gap and all: on any
    /// real link a request costs a round trip, and a round trip moves far more than this. A gap
    /// is joined only while the gaps stay within 1/20 of the wanted bytes (at least 512 bytes, a
    /// request's own headers), so coalescing never adds more than about 5% to the transfer.
    static let coalesceGap: UInt64 = 32 << 10
    /// A coalesced request stops growing here (one large file may exceed it), so that parallel
    /// transfers share the work and a reset costs at most about this much.
    static let maxRequestBytes: UInt64 = 8 << 20

    /// Bytes the ranges transfer (file ranges and chunk ranges).
    var fetchBytes: UInt64 {
        ranges.reduce(0) { $0 + $1.count } + chunkRanges.reduce(0) { $0 + $1.count } + deltas.reduce(0) { $0 + $1.entry.length }
    }
    /// Entries the ranges fetch (a content shared by several paths is fetched once), chunks and deltas counted.
    var fetchEntries: Int { ranges.reduce(0) { $0 + $1.entries.count } + chunkRanges.reduce(0) { $0 + $1.chunks.count } + deltas.count }

    /// Plans `files` (every file must have a location; nil otherwise). `local` finds a file's
    /// content on disk; a content missing there is fetched once, for the first path in archive
    /// order, and the other paths with that content link to it.
    /// Files in `chunked` whose content is not on disk are left out: their chunks are planned
    /// apart (`ChunkPlanner`); so are contents in `byDelta` (sha256 hex), which deltas make.
    static func make(_ files: [ManifestFile], local: (ManifestFile) -> FileOrigin?, chunked: Set<String> = [], byDelta: Set<String> = [],
                     gap: UInt64 = coalesceGap, maxRequest: UInt64 = maxRequestBytes) -> FilePlan? {
        var sources = PlannedFiles(release: files)
        sources.reserveCapacity(files.count)
        var toFetch: [String: ManifestFile] = [:]
        for (i, f) in files.enumerated() {
            guard f.location != nil else { return nil }
            if let s = local(f) {
                sources.append(i, s)
                continue
            }
            if chunked.contains(f.path) { continue }
            sources.append(i, .archive)
            if !byDelta.isEmpty && byDelta.contains(f.sha256) { continue }
            if let other = toFetch[f.sha256], other.location!.headerOffset < f.location!.headerOffset { continue }
            toFetch[f.sha256] = f
        }
        let entries = toFetch.values.sorted { $0.location!.headerOffset < $1.location!.headerOffset }
        return FilePlan(files: sources, ranges: coalesce(entries, gap: gap, maxRequest: maxRequest))
    }

    /// Groups entries (in archive order, disjoint) into requests: the next entry joins the
    /// current request when the bytes between them are at most `gap`, the request's gaps stay
    /// within 1/20 of its wanted bytes (or 512 bytes), and it stays within `maxRequest`.
    static func coalesce(_ entries: [ManifestFile], gap: UInt64, maxRequest: UInt64) -> [FetchRange] {
        var out: [FetchRange] = []
        var wanted: UInt64 = 0  // entry bytes in the last request
        for e in entries {
            let r = e.location!.range
            if var last = out.last, r.lowerBound >= last.end, r.upperBound - last.start <= maxRequest {
                let between = r.lowerBound - last.end
                let joinedWanted = wanted + UInt64(r.count)
                let joinedGaps = (last.count - wanted) + between
                if between <= gap && joinedGaps <= max(512, joinedWanted / 20) {
                    last.end = r.upperBound
                    last.entries.append(e)
                    out[out.count - 1] = last
                    wanted = joinedWanted
                    continue
                }
            }
            out.append(FetchRange(start: r.lowerBound, end: r.upperBound, entries: [e]))
            wanted = UInt64(r.count)
        }
        return out
    }

    /// Whether ranges pay off against downloading the archive of `archiveSize` bytes: they
    /// transfer at most `maxPercent` of it (the `differential_max_percent` option).
    func paysOff(archiveSize: UInt64, maxPercent: Int) -> Bool {
        fetchBytes.multipliedFullWidth(by: 100) <= archiveSize.multipliedFullWidth(by: UInt64(maxPercent))
    }
}

extension UpdatePreview {
    /// What a differential update by `plan` would do.
    init(candidate: ReleaseSummary, plan: FilePlan, archiveBytes: UInt64) {
        self.init(candidate: candidate, wholeArchiveReason: nil, transferBytes: plan.fetchBytes, archiveBytes: archiveBytes,
                  requests: plan.ranges.count + plan.chunkRanges.count + DeltaTake.ranges(plan.deltas).count)
        for (f, origin) in plan.files {
            switch origin {
            case .installed, .fetched: linkedFiles += 1
            case .bundle: bundleFiles += 1
            case .archive: fetchedFiles.append(f.path)
            }
        }
        // A chunked file rebuilt from chunks is fetched in part.
        fetchedFiles += plan.chunked.map(\.file.path)
    }
}

extension FileOrigin {
    /// Where a file's content already is on disk: an installed release's file of the same
    /// sha256 and size, a file an earlier attempt fetched, or the bundle's file (in that order).
    static func onDisk(_ installed: InstalledFiles, _ fetched: [String: String],
                       _ bundle: [String: String] = [:]) -> (ManifestFile) -> FileOrigin? {
        { f in
            if let i = installed[f] { return .installed(i) }
            // (Most updates have neither: no digest's hex made per file to find that out.)
            if !fetched.isEmpty, let p = fetched[f.sha256] { return .fetched(p) }
            return bundle.isEmpty ? nil : bundle[f.sha256].map(FileOrigin.bundle)
        }
    }
}
