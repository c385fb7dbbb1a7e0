/// Where one file of a new release comes from in a differential update.
enum FileSource: Equatable {
    /// A file of an installed release (active, pending or kept): hard-linked.
    case installed(String)
    /// A file an earlier, interrupted attempt fetched and verified (`downloads/<archive>.files/`):
    /// hard-linked.
    case fetched(String)
    /// A file of the bundle with the same sha256: copied (cloned where the filesystem can).
    case bundle(String)
    /// Fetched now from the archive with a range request.
    case archive
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
struct DeltaPlan: Equatable {
    /// Every file of the release, in manifest order, with its source.
    var files: [(file: ManifestFile, source: FileSource)]
    var ranges: [FetchRange]

    /// Neighbouring entries closer than this are fetched with one request, gap and all: on any
    /// real link a request costs a round trip, and a round trip moves far more than this.
    static let coalesceGap: UInt64 = 32 << 10
    /// A coalesced request stops growing here (one large file may exceed it), so that parallel
    /// transfers share the work and a reset costs at most about this much.
    static let maxRequestBytes: UInt64 = 8 << 20
    /// Above this share of the archive, the whole-archive download is used instead: one
    /// resumable stream then costs about what the ranges would (see bench/RESULTS.md).
    static let maxShareOfArchive = 0.75

    /// Bytes the ranges transfer.
    var fetchBytes: UInt64 { ranges.reduce(0) { $0 + $1.count } }
    /// Entries the ranges fetch (a content shared by several paths is fetched once).
    var fetchEntries: Int { ranges.reduce(0) { $0 + $1.entries.count } }

    static func == (a: DeltaPlan, b: DeltaPlan) -> Bool {
        a.ranges == b.ranges && a.files.count == b.files.count
            && zip(a.files, b.files).allSatisfy { $0.file == $1.file && $0.source == $1.source }
    }

    /// Plans `files` (every file must have a location; nil otherwise). `local` finds a file's
    /// content on disk; a content missing there is fetched once, for the first path in archive
    /// order, and the other paths with that content link to it.
    static func make(_ files: [ManifestFile], local: (ManifestFile) -> FileSource?,
                     gap: UInt64 = coalesceGap, maxRequest: UInt64 = maxRequestBytes) -> DeltaPlan? {
        var sources: [(file: ManifestFile, source: FileSource)] = []
        sources.reserveCapacity(files.count)
        var toFetch: [String: ManifestFile] = [:]
        for f in files {
            guard f.location != nil else { return nil }
            if let s = local(f) {
                sources.append((f, s))
                continue
            }
            sources.append((f, .archive))
            if let other = toFetch[f.sha256], other.location!.headerOffset < f.location!.headerOffset { continue }
            toFetch[f.sha256] = f
        }
        let entries = toFetch.values.sorted { $0.location!.headerOffset < $1.location!.headerOffset }
        return DeltaPlan(files: sources, ranges: coalesce(entries, gap: gap, maxRequest: maxRequest))
    }

    /// Groups entries (in archive order, disjoint) into requests: the next entry joins the
    /// current request when the bytes between them are at most `gap` and the request stays
    /// within `maxRequest`.
    static func coalesce(_ entries: [ManifestFile], gap: UInt64, maxRequest: UInt64) -> [FetchRange] {
        var out: [FetchRange] = []
        for e in entries {
            let r = e.location!.range
            if var last = out.last, r.lowerBound >= last.end, r.lowerBound - last.end <= gap,
               r.upperBound - last.start <= maxRequest {
                last.end = r.upperBound
                last.entries.append(e)
                out[out.count - 1] = last
            } else {
                out.append(FetchRange(start: r.lowerBound, end: r.upperBound, entries: [e]))
            }
        }
        return out
    }

    /// Whether ranges pay off against downloading the archive of `archiveSize` bytes.
    func paysOff(archiveSize: UInt64) -> Bool {
        Double(fetchBytes) <= Double(archiveSize) * DeltaPlan.maxShareOfArchive
    }
}
