import Glibc

/// Turns one chunk range's bytes, pushed as they arrive, into verified chunks: each chunk's
/// compressed bytes are gathered (memory: one chunk at a time), decoded on their own
/// (`ChunkDecoder`: length and sha256 checked) and kept as `<dir>/<sha256>`, read-only, or
/// written straight into the file being rebuilt at its place there (`DirectChunks`). A linked
/// file's chunk decodes only after the bytes before it: when those are on disk
/// (`LinkedHistory`) it is decoded and checked the same way; otherwise it is kept compressed
/// (`<dir>/<sha256>.<offset>`) and decoded and checked when its file is rebuilt. Bytes
/// between chunks are passed over; more bytes than the range holds are refused. A chunk that
/// does not decode to what the index says raises `DifferentialFallback`: the whole archive's
/// own checks then decide between a lying server and a wrong index.
final class ChunkReceiver: RangeConsumer {
    let range: FetchRange
    let chunks: [(offset: UInt64, method: UInt16, record: ChunkRecord)]
    let dir: String
    let shown: String
    /// Called for each chunk kept, with its name (`ChunkPlanner.key`) and path.
    let onChunk: (String, String) throws -> Void
    /// The bytes before a linked chunk (by archive offset) when they are on disk
    /// (`LinkedHistory`): the chunk is then decoded and checked as it arrives.
    let history: (UInt64) -> [UInt8]?
    /// Where a decoded chunk goes straight into the file being rebuilt (`DirectChunks`).
    let direct: DirectChunks?

    private var offset: UInt64
    private var index = 0
    private var pending: [UInt8] = []
    /// The history after the linked chunk decoded last, and where its bytes ended: the next
    /// chunk of its file, when it follows in this range, decodes after it without asking
    /// `history` to read and hash the same bytes again.
    private var carried: (end: UInt64, history: [UInt8])?
    /// The file being rebuilt that the last chunk written in place went to.
    private var directFile: File?

    init(_ r: ChunkRange, dir: String, shown: String, history: @escaping (UInt64) -> [UInt8]? = { _ in nil }, direct: DirectChunks? = nil,
         onChunk: @escaping (String, String) throws -> Void) {
        range = FetchRange(start: r.start, end: r.end, entries: [])
        chunks = r.chunks
        self.dir = dir
        self.shown = shown
        self.history = history
        self.direct = direct
        self.onChunk = onChunk
        offset = r.start
    }

    func push(_ bytes: UnsafeRawBufferPointer) throws {
        if UInt64(bytes.count) > range.end - offset {
            throw DifferentialFallback(message: "\(shown): bytes \(range.start)-\(range.end - 1): more bytes than the range holds")
        }
        var at = 0
        while at < bytes.count {
            guard index < chunks.count else { return }  // trailing bytes after the last chunk: none are asked for
            let c = chunks[index]
            let chunkEnd = c.offset + UInt64(c.record.compressedSize)
            let here = offset + UInt64(at)
            if here < c.offset {
                at += Int(min(UInt64(bytes.count - at), c.offset - here))  // a gap between chunks
                continue
            }
            let take = Int(min(UInt64(bytes.count - at), chunkEnd - here))
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[at..<(at + take)]))
            at += take
            if UInt64(pending.count) == UInt64(c.record.compressedSize) {
                try keep(c)
                pending.removeAll(keepingCapacity: true)
                index += 1
            }
        }
        offset += UInt64(bytes.count)
    }

    private func keep(_ c: (offset: UInt64, method: UInt16, record: ChunkRecord)) throws {
        let bytes: [UInt8]
        var name = ChunkPlanner.key(c)
        let linked = c.method == ChunkPlanner.linkedMethod
        let before: [UInt8]?
        if !linked {
            before = []
        } else if let carried, carried.end == c.offset {
            before = carried.history
        } else {
            before = history(c.offset)
        }
        if let before {
            do {
                bytes = try pending.withUnsafeBytes { chunk in
                    try before.withUnsafeBytes { h in
                        try ChunkDecoder.decode(chunk, method: linked ? 8 : c.method, chunk: c.record, history: linked ? h : nil)
                    }
                }
            } catch {
                throw DifferentialFallback(message: "\(shown): the chunk at \(c.offset) (\(c.record.compressedSize) bytes) does not decode to its sha256 (\(error))", badBytes: true)
            }
            if linked { carried = (c.offset + UInt64(c.record.compressedSize), Array((before + bytes).suffix(ChunkDecoder.historyBytes))) }
            name = c.record.id.hex
            if let place = direct?.place(c.offset) {
                try DirectChunks.write(bytes, at: place, open: &directFile)
                return try onChunk(DirectChunks.key(c.offset), place.path)
            }
        } else {
            bytes = pending  // a linked chunk whose history is not on disk: decoded at the rebuild
        }
        let path = dir + "/" + name
        try KeptChunk.write(bytes, at: path)
        try onChunk(name, path)
    }

    func finish() throws {
        guard index == chunks.count else {
            throw AssetPatchError(.network, "\(shown): bytes \(range.start)-\(range.end - 1) ended before chunk \(index + 1) of \(chunks.count)", transient: true)
        }
        // Every receiver of a fetch lives until its end: what a finished one held is let go.
        pending = []
        carried = nil
        directFile = nil
    }

    func abandon() {
        pending = []
        carried = nil
        directFile = nil
    }

    func rest() -> (any RangeConsumer)? {
        guard index < chunks.count else { return nil }
        return ChunkReceiver(ChunkRange(start: chunks[index].offset, end: range.end, chunks: Array(chunks[index...])), dir: dir, shown: shown,
                             history: history, direct: direct, onChunk: onChunk)
    }
}
