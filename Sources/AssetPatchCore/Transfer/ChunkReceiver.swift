import Glibc

/// Turns one chunk range's bytes, pushed as they arrive, into verified chunks: each chunk's
/// compressed bytes are gathered (memory: one chunk at a time), decoded on their own
/// (`ChunkDecoder`: length and sha256 checked) and kept as `<dir>/<sha256>`, read-only. A linked
/// file's chunk is kept compressed (`<dir>/<sha256>.<offset>`): it decodes only after the bytes
/// before it, when its file is rebuilt, and is checked there. Bytes
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

    private var offset: UInt64
    private var index = 0
    private var pending: [UInt8] = []

    init(_ r: ChunkRange, dir: String, shown: String, onChunk: @escaping (String, String) throws -> Void) {
        range = FetchRange(start: r.start, end: r.end, entries: [])
        chunks = r.chunks
        self.dir = dir
        self.shown = shown
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
        if c.method == ChunkPlanner.linkedMethod {
            bytes = pending  // decoded at the rebuild, after the bytes before it
        } else {
            do {
                bytes = try pending.withUnsafeBytes { try ChunkDecoder.decode($0, method: c.method, chunk: c.record) }
            } catch {
                throw DifferentialFallback(message: "\(shown): the chunk at \(c.offset) (\(c.record.compressedSize) bytes) does not decode to its sha256 (\(error))", badBytes: true)
            }
        }
        let name = ChunkPlanner.key(c)
        let path = dir + "/" + name
        try ChunkReceiver.store(bytes, at: path)
        try onChunk(name, path)
    }

    /// Keeps a chunk's bytes at `path` (read-only, renamed into place; not synced: a chunk lost
    /// to a power cut is fetched again), unless a chunk is there already.
    static func store(_ bytes: [UInt8], at path: String) throws {
        guard !FS.isRegularFile(path) else { return }
        let temp = FS.tempName(for: path)
        do {
            let out = try File.open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o444)
            try out.write(bytes)
            try FS.rename(temp, path)
        } catch {
            try? FS.unlink(temp)
            throw error
        }
    }

    func finish() throws {
        guard index == chunks.count else {
            throw AssetPatchError(.network, "\(shown): bytes \(range.start)-\(range.end - 1) ended before chunk \(index + 1) of \(chunks.count)", transient: true)
        }
    }

    func abandon() { pending = [] }

    func rest() -> (any RangeConsumer)? {
        guard index < chunks.count else { return nil }
        return ChunkReceiver(ChunkRange(start: chunks[index].offset, end: range.end, chunks: Array(chunks[index...])), dir: dir, shown: shown,
                             onChunk: onChunk)
    }
}
