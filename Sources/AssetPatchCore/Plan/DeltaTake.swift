/// A file of the new release made from a delta (`DeltaEntry`) against a file on disk: the
/// delta's bytes are fetched from the delta file the head names, applied to `base` (an
/// installed release's file with the entry's base sha256 and size), and the result kept
/// only if it has the file's sha256. Taken where the delta is smaller than what the plan
/// would fetch for the file otherwise (its range, or its chunks not on disk).
struct DeltaTake {
    var file: ManifestFile
    var entry: DeltaEntry
    var base: String

    /// The plan's files the offer's deltas (by target sha256 hex) make for fewer bytes than it
    /// fetches for them, each once; `base` finds a delta's base file on disk (nil: none).
    static func choose(_ plan: FilePlan, offer: [String: DeltaEntry], base: (DeltaEntry) -> String?) -> [String: DeltaTake] {
        var cost: [String: (file: ManifestFile, bytes: UInt64)] = [:]
        for r in plan.ranges {
            for e in r.entries { cost[e.sha256] = (e, UInt64(e.location!.range.count)) }
        }
        for f in plan.chunked {
            var bytes: UInt64 = 0
            for (record, source) in f.chunks {
                switch source {
                case .archive, .linked: bytes += UInt64(record.compressedSize)
                case .local, .fetched: break
                }
            }
            cost[f.file.sha256, default: (f.file, 0)].bytes += bytes
        }
        var out: [String: DeltaTake] = [:]
        for (sha, c) in cost {
            guard let e = offer[sha], e.length < c.bytes, e.targetSize == c.file.size, let path = base(e) else { continue }
            out[sha] = DeltaTake(file: c.file, entry: e, base: path)
        }
        return out
    }
}

extension DeltaTake {
    /// `takes` (in file order) in range requests: neighbours within `FilePlan.coalesceGap`
    /// share one, up to `FilePlan.maxRequestBytes`.
    static func ranges(_ takes: [DeltaTake]) -> [(range: FetchRange, takes: [DeltaTake])] {
        var out: [(range: FetchRange, takes: [DeltaTake])] = []
        for t in takes {
            let start = t.entry.offset, end = t.entry.offset + t.entry.length
            if let last = out.last, start >= last.range.end, start - last.range.end <= FilePlan.coalesceGap / 8,
               end - last.range.start <= FilePlan.maxRequestBytes {
                out[out.count - 1].range.end = end
                out[out.count - 1].takes.append(t)
            } else {
                out.append((FetchRange(start: start, end: end, entries: []), [t]))
            }
        }
        return out
    }
}
