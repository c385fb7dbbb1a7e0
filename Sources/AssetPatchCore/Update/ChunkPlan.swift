import Glibc

/// Where one chunk of a chunked file comes from.
enum ChunkSource: Equatable {
    /// Bytes of a file on disk (an installed release's file, or the bundle's) at an offset:
    /// copied, and hashed as they are copied.
    case local(path: String, offset: UInt64)
    /// A chunk an earlier, interrupted attempt fetched and verified (`downloads/<archive>.chunks/`).
    case fetched(String)
    /// Fetched now: the chunk's compressed bytes at this archive offset.
    case archive(offset: UInt64)
}

/// A chunked file to rebuild in the new release, chunk by chunk.
struct ChunkedFile: Equatable {
    var file: ManifestFile
    /// The entry's compression method: how each fetched chunk decodes.
    var method: UInt16
    var chunks: [(record: ChunkRecord, source: ChunkSource)]

    static func == (a: ChunkedFile, b: ChunkedFile) -> Bool {
        a.file == b.file && a.method == b.method && a.chunks.count == b.chunks.count
            && zip(a.chunks, b.chunks).allSatisfy { $0.record == $1.record && $0.source == $1.source }
    }
}

/// One range request of chunks: archive bytes `start..<end`, the chunks in it in order (each at
/// its archive offset, with its entry's method), gaps between them passed over.
struct ChunkRange: Equatable {
    var start: UInt64
    var end: UInt64
    var chunks: [(offset: UInt64, method: UInt16, record: ChunkRecord)]

    var count: UInt64 { end - start }

    static func == (a: ChunkRange, b: ChunkRange) -> Bool {
        a.start == b.start && a.end == b.end && a.chunks.count == b.chunks.count
            && zip(a.chunks, b.chunks).allSatisfy { $0.offset == $1.offset && $0.record == $1.record }
    }
}

/// Plans the chunked files of a new release: every chunk found on disk (a chunk with the same
/// sha256 in an installed release's chunked file, in the bundle, or fetched by an earlier
/// attempt) is copied from there; the rest is fetched, each distinct chunk once, in coalesced
/// range requests (at most `coalesceGap` bytes between chunks, the gaps within 1/20 of what is
/// wanted, at most `maxRequest` bytes a request).
enum ChunkPlanner {
    static func plan(_ files: [(file: ManifestFile, chunks: [ChunkRecord])], local: [ChunkID: (path: String, offset: UInt64)],
                     fetched: [String: String], gap: UInt64 = DifferentialPlan.coalesceGap,
                     maxRequest: UInt64 = DifferentialPlan.maxRequestBytes) -> (files: [ChunkedFile], ranges: [ChunkRange]) {
        var out: [ChunkedFile] = []
        var wanted: [ChunkID: (offset: UInt64, method: UInt16, record: ChunkRecord)] = [:]
        for (file, chunks) in files {
            guard let location = file.location else { continue }
            var slots: [(record: ChunkRecord, source: ChunkSource)] = []
            var offset = location.dataOffset
            for c in chunks {
                if let l = local[c.id] {
                    slots.append((c, .local(path: l.path, offset: l.offset)))
                } else if let path = fetched[c.id.hex] {
                    slots.append((c, .fetched(path)))
                } else {
                    slots.append((c, .archive(offset: offset)))
                    if wanted[c.id] == nil { wanted[c.id] = (offset, location.method, c) }
                }
                offset += UInt64(c.compressedSize)
            }
            out.append(ChunkedFile(file: file, method: location.method, chunks: slots))
        }
        return (out, coalesce(wanted.values.sorted { $0.offset < $1.offset }, gap: gap, maxRequest: maxRequest))
    }

    static func coalesce(_ chunks: [(offset: UInt64, method: UInt16, record: ChunkRecord)], gap: UInt64, maxRequest: UInt64) -> [ChunkRange] {
        var out: [ChunkRange] = []
        var wanted: UInt64 = 0
        for c in chunks {
            let start = c.offset, end = c.offset + UInt64(c.record.compressedSize)
            if var last = out.last, start >= last.end, end - last.start <= maxRequest {
                let between = start - last.end
                let joinedWanted = wanted + (end - start)
                let joinedGaps = (last.count - wanted) + between
                if between <= gap && joinedGaps <= max(512, joinedWanted / 20) {
                    last.end = end
                    last.chunks.append(c)
                    out[out.count - 1] = last
                    wanted = joinedWanted
                    continue
                }
            }
            out.append(ChunkRange(start: start, end: end, chunks: [c]))
            wanted = end - start
        }
        return out
    }
}
