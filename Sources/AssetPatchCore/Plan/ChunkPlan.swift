import Glibc

/// Where one chunk of a chunked file comes from. Small on purpose (a gigabyte of 8 KiB chunks
/// is 131,072 of them): paths live once, in `LocalChunks.files`.
enum ChunkOrigin: Equatable {
    /// Bytes of a file on disk (`LocalChunks.files[file]`: an installed release's, the
    /// bundle's, or one an earlier attempt fetched whole) at an offset: copied, and checked by
    /// the whole file's hash.
    case local(file: UInt32, offset: UInt64)
    /// A chunk an earlier, interrupted attempt fetched (`downloads/<archive>.chunks/<sha256>`),
    /// hashed again when used.
    case fetched
    /// Fetched now: the chunk's compressed bytes at this archive offset.
    case archive(offset: UInt64)
    /// A chunk of a linked file (its chunks share history): its compressed bytes at this
    /// archive offset, fetched now or kept by an earlier attempt (`ChunkPlanner.key`), decoded
    /// when the file is rebuilt, after the bytes before it.
    case linked(offset: UInt64)
}

/// Where the chunks an update can copy lie: installed releases' chunked files, each chunk by
/// the first 64 bits of its sha256 (a false match costs a fallback to the whole archive when
/// the rebuilt file's hash disagrees, never a wrong file). A sorted array of two words a chunk
/// (a gigabyte of 8 KiB chunks: 2 MiB), searched by bisection.
struct LocalChunks {
    private(set) var files: [String] = []
    /// (id prefix, file index << 48 | offset), sorted by prefix once `seal` ran.
    private var entries: [(key: UInt64, place: UInt64)] = []
    private var sealed = true

    /// Records where each chunk of a chunked file lies (`chunks` in file order).
    mutating func add(_ path: String, _ chunks: [ChunkRecord]) {
        add(path, pages: [chunks]) { $0 }
    }

    /// Records where each chunk of a chunked file lies, its chunk list read one page at a time
    /// (`load` returns a page's chunks, nil when the page is missing: the chunks before it still
    /// count, those after it can't be placed).
    mutating func add<Page>(_ path: String, pages: [Page], load: (Page) -> [ChunkRecord]?) {
        guard files.count < 1 << 16 else { return }
        let index = UInt64(files.count)
        files.append(path)
        sealed = false
        var offset: UInt64 = 0
        for page in pages {
            guard let chunks = load(page) else { return }
            for c in chunks where offset < 1 << 48 {
                entries.append((c.id.w0, index << 48 | offset))
                offset += UInt64(c.size)
            }
        }
    }

    /// Sorts the entries by prefix, then by place (files in the order added, offsets in
    /// order): the first place a chunk was seen wins. Lookups need it.
    mutating func seal() {
        guard !sealed else { return }
        entries.sort { $0.key != $1.key ? $0.key < $1.key : $0.place < $1.place }
        sealed = true
    }

    var count: Int { entries.count }

    subscript(id: ChunkID) -> (file: UInt32, offset: UInt64)? {
        precondition(sealed, "LocalChunks looked up before seal()")
        var lo = 0, hi = entries.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if entries[mid].key < id.w0 { lo = mid + 1 } else { hi = mid }
        }
        guard lo < entries.count, entries[lo].key == id.w0 else { return nil }
        let place = entries[lo].place
        return (UInt32(place >> 48), place & (1 << 48 - 1))
    }
}

/// A chunked file to rebuild in the new release, chunk by chunk.
struct ChunkedFile: Equatable {
    var file: ManifestFile
    /// The entry's compression method: how each fetched chunk decodes.
    var method: UInt16
    /// Its chunks share history (`LinkedIndex`).
    var linked = false
    /// The file's chunks (the index's list, shared, not copied) and where each comes from.
    var records: [ChunkRecord]
    var sources: [ChunkOrigin]
    /// The files `.local` sources name.
    var localFiles: [String]

    var chunks: Zip2Sequence<[ChunkRecord], [ChunkOrigin]> { zip(records, sources) }
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
/// sha256 in an installed release's chunked file, or fetched by an earlier attempt) is copied
/// from there; the rest is fetched, each distinct chunk once, in coalesced
/// range requests (at most `coalesceGap` bytes between chunks, the gaps within 1/20 of what is
/// wanted, at most `maxRequest` bytes a request). A gap never spans a chunk an earlier attempt
/// fetched and verified: what was verified is not asked for again, not even as a gap's bytes.
/// (Chunks an earlier attempt wrote in place, `DirectChunks`, are planned as fetched; an
/// update's plan then leaves them out, `FilePlan.leaveOutInPlace`, and a group's fetch leaves
/// them out when it starts, so only an update's byte count excludes them.)
///
/// A linked file's chunk (`linked`: chunks that share history) decodes only after the bytes
/// before it in its own file: its compressed bytes are fetched where it lies, kept as they are
/// (`key`), and decoded when the file is rebuilt; a later place of the same chunk copies it.
enum ChunkPlanner {
    /// The method a chunk range gives a linked file's chunk: kept compressed as it arrives.
    static let linkedMethod: UInt16 = 0x8008

    /// The name a fetched chunk is kept under: its sha256 (hex) once decoded; a linked chunk's
    /// compressed bytes, its sha256 and archive offset.
    static func key(_ c: (offset: UInt64, method: UInt16, record: ChunkRecord)) -> String {
        c.method == linkedMethod ? linkedKey(c.record.id, c.offset) : c.record.id.hex
    }

    static func linkedKey(_ id: ChunkID, _ offset: UInt64) -> String { id.hex + "." + String(offset) }

    /// The chunked files worth rebuilding from chunks: those with a chunk that need not be
    /// fetched for them, because it is on disk (`local`), kept by an earlier attempt
    /// (`fetched`), or in another place of these files too (fetched once for both). The others
    /// are better fetched whole: the same bytes in one range and nothing to rebuild, so that a
    /// fresh install fetches no chunks (its 1,000 files came as 17,000 chunk ranges), and an
    /// update whose rewritten files share nothing builds no file from a chunk a file (a tenth of
    /// 1,000 files rewritten took 1.19 s in chunks, 0.25 s whole).
    static func worthRebuilding(_ files: [(file: ManifestFile, chunks: [ChunkRecord])], local: LocalChunks,
                                fetched: [String: String], linked: Set<String>) -> [(file: ManifestFile, chunks: [ChunkRecord])] {
        // Chunks by the first 64 bits of their sha256: a false match keeps a file chunked, no more.
        var keys = files.flatMap { $0.chunks.map(\.id.w0) }
        keys.sort()
        func repeated(_ key: UInt64) -> Bool {
            let at = keys.lowerBound { $0 < key }
            return at + 1 < keys.count && keys[at + 1] == key
        }
        return files.filter { file, chunks in
            guard let location = file.location else { return true }
            let isLinked = linked.contains(file.path) && location.method == 8
            var offset = location.dataOffset
            for c in chunks {
                if local[c.id] != nil || repeated(c.id.w0) { return true }
                if !fetched.isEmpty, fetched[c.id.hex] != nil || (isLinked && fetched[linkedKey(c.id, offset)] != nil) { return true }
                offset += UInt64(c.compressedSize)
            }
            return false
        }
    }

    /// `linked`: the paths of the files whose chunks share history.
    static func plan(_ files: [(file: ManifestFile, chunks: [ChunkRecord])], local: LocalChunks,
                     fetched: [String: String], linked: Set<String> = [], gap: UInt64 = FilePlan.coalesceGap,
                     maxRequest: UInt64 = FilePlan.maxRequestBytes) -> (files: [ChunkedFile], ranges: [ChunkRange]) {
        var out: [ChunkedFile] = []
        var wanted: [(offset: UInt64, method: UInt16, record: ChunkRecord)] = []
        /// Chunks fetched at an earlier place: on disk decoded by the time a later place is
        /// rebuilt (a linked one decoded by the rebuild at its first place: files are rebuilt in
        /// this order), which copies it.
        var planned = Set<ChunkID>()
        var kept: [Range<UInt64>] = []
        for (file, chunks) in files {
            guard let location = file.location else { continue }
            let isLinked = linked.contains(file.path) && location.method == 8
            var sources: [ChunkOrigin] = []
            sources.reserveCapacity(chunks.count)
            var offset = location.dataOffset
            for c in chunks {
                let stored = offset..<(offset + UInt64(c.compressedSize))
                if let l = local[c.id] {
                    sources.append(.local(file: l.file, offset: l.offset))
                } else if fetched[c.id.hex] != nil {
                    sources.append(.fetched)
                    kept.append(stored)
                } else if planned.contains(c.id) {
                    sources.append(.fetched)
                } else if isLinked {
                    sources.append(.linked(offset: offset))
                    planned.insert(c.id)
                    if fetched[linkedKey(c.id, offset)] != nil {
                        kept.append(stored)
                    } else {
                        wanted.append((offset, linkedMethod, c))
                    }
                } else {
                    sources.append(.archive(offset: offset))
                    planned.insert(c.id)
                    wanted.append((offset, location.method, c))
                }
                offset += UInt64(c.compressedSize)
            }
            out.append(ChunkedFile(file: file, method: location.method, linked: isLinked, records: chunks, sources: sources,
                                   localFiles: local.files))
        }
        return (out, coalesce(wanted.sorted { $0.offset < $1.offset }, gap: gap, maxRequest: maxRequest,
                              avoiding: kept.sorted { $0.lowerBound < $1.lowerBound }))
    }

    /// `ranges` without the chunks `kept` says are there already, each split where those lie, so
    /// that none is asked for again, not even as the bytes between two wanted ones.
    static func leavingOut(_ ranges: [ChunkRange], _ kept: ((offset: UInt64, method: UInt16, record: ChunkRecord)) -> Bool) -> [ChunkRange] {
        var out: [ChunkRange] = []
        var run: [(offset: UInt64, method: UInt16, record: ChunkRecord)] = []
        func endRun() {
            guard let first = run.first, let last = run.last else { return }
            out.append(ChunkRange(start: first.offset, end: last.offset + UInt64(last.record.compressedSize), chunks: run))
            run = []
        }
        for r in ranges {
            for c in r.chunks {
                if kept(c) { endRun() } else { run.append(c) }
            }
            endRun()
        }
        return out
    }

    /// `avoiding`: archive ranges no gap may span (sorted), verified chunks' bytes.
    static func coalesce(_ chunks: [(offset: UInt64, method: UInt16, record: ChunkRecord)], gap: UInt64, maxRequest: UInt64,
                         avoiding: [Range<UInt64>] = []) -> [ChunkRange] {
        var out: [ChunkRange] = []
        var wanted: UInt64 = 0
        var next = 0  // the first range of `avoiding` that may lie at or after the current gap
        for c in chunks {
            let start = c.offset, end = c.offset + UInt64(c.record.compressedSize)
            if var last = out.last, start >= last.end, end - last.start <= maxRequest {
                let between = start - last.end
                let joinedWanted = wanted + (end - start)
                let joinedGaps = (last.count - wanted) + between
                while next < avoiding.count && avoiding[next].upperBound <= last.end { next += 1 }
                let spansKept = next < avoiding.count && avoiding[next].lowerBound < start
                if between <= gap && joinedGaps <= max(512, joinedWanted / 20) && !spansKept {
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
