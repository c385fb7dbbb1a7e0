import Glibc
internal import CZlib

/// What compressing one file made of it: the entry's method, CRC-32 and sizes, the file's
/// sha256, and for a chunked entry its chunks in order.
struct CompressedEntry {
    var method: UInt16
    var crc: UInt32
    var compressedSize: UInt64
    var size: UInt64
    var sha256: String
    var chunks: [ChunkRecord]
    /// A chunked entry whose chunks share history (sync flushes).
    var linked = false
}

/// Compresses one file into its archive entry, the same bytes on any thread: each file is read
/// once while its CRC-32 and sha256 are taken. An entry is deflated unless that saves under 5%,
/// then stored. Files of 256 KiB and more are sampled first (`looksIncompressible`): when
/// deflating windows spread over the file saves under 2% of them, the file is already
/// compressed (images, audio, archives) and is stored without deflating the rest, which is most
/// of a publish's time otherwise and saves nothing. Whatever the route, the result depends only
/// on the file's bytes, the level and the chunker.
///
/// A chunked entry (`Chunker`) is still one ordinary deflate stream (every zip reader inflates it
/// whole), with a full flush after each chunk: the compressor's history is reset and the output
/// aligned to a byte, so each chunk's compressed bytes inflate on their own, and a client fetches
/// a chunk with one range and decodes it without the bytes before it. A stored chunked entry's
/// chunks are plain ranges of it.
///
/// A linked entry (`EntrySource.linked`) is cut the same way with a sync flush after each chunk
/// instead: the output is aligned to a byte but the history is kept, so the entry compresses
/// nearly as well as one unflushed stream, and a chunk decodes given the 32 KiB of the file
/// before it (`ChunkDecoder`), which a client rebuilding the file in order has written already.
final class EntryCompressor {
    let level: Int32
    let buffers = ZipBuffers(size: 1 << 20)

    /// The samples' size, and the smallest file sampled (see `looksIncompressible`).
    static let sampleWindow = 32 << 10
    static let sampleThreshold: UInt64 = 256 << 10

    init(level: Int32) {
        self.level = level
    }

    /// Compresses `path` (expected to be `size` bytes) into `out`, chunked when `chunker` is given.
    /// `linked`: a chunked entry's chunks share history (sync flushes). `ownChunkCostLimit`: an
    /// entry not linked is linked all the same when deflate shrinks it and chunks of their own
    /// would take more than this percent more bytes (`ownChunksCostMore`); nil: never.
    func compress(_ path: String, size: UInt64, chunker: Chunker?, linked: Bool = false, ownChunkCostLimit: Int? = nil,
                  into out: EntryOutput) throws -> CompressedEntry {
        let src = try File.openRead(path)
        src.adviseSequential()
        let sha = try Digest(.sha256)
        let incompressible = try looksIncompressible(src, size: size)
        var entry: CompressedEntry
        if let chunker {
            var linked = linked
            if !linked && !incompressible, let limit = ownChunkCostLimit {
                linked = try ownChunksCostMore(src, size: size, chunker: chunker, limitPercent: limit)
            }
            entry = incompressible ? try storeChunked(src, size: size, chunker: chunker, sha: sha, into: out)
                                   : try deflateChunked(src, size: size, chunker: chunker, linked: linked, sha: sha, into: out)
            entry.linked = linked && !incompressible
        } else if incompressible || size == 0 {
            // An empty file stored: no bytes, as zip stores it (deflated, it takes two).
            entry = try store(src, sha: sha, into: out)
        } else {
            entry = try deflate(src, size: size, sha: sha, into: out)
        }
        guard entry.size == size else {
            throw AssetPatchError(.io, "\(path): changed while it was read (\(entry.size) of \(size) bytes)")
        }
        if entry.method == 8 && size > 0 && Double(entry.compressedSize) > Double(size) * 0.95 {
            // Deflate saved under 5%: the entry is stored, its chunks plain ranges of it.
            out.rewind()
            let stored = try copy(src, into: out)
            guard stored.total == size else {
                throw AssetPatchError(.io, "\(path): changed while it was read (\(stored.total) of \(size) bytes)")
            }
            entry.method = 0
            entry.linked = false
            entry.compressedSize = size
            for i in entry.chunks.indices { entry.chunks[i].compressedSize = entry.chunks[i].size }
        }
        return entry
    }

    /// Deflates windows of `sampleWindow` bytes spread evenly over a file of at least
    /// `sampleThreshold` bytes (one per 256 KiB, 2 to 16 of them: an eighth of the file or
    /// less), each on its own: true when together they save under 2%. Deflate finds little
    /// more in a whole file than in windows as long as its history (32 KiB), so a file whose
    /// windows are all incompressible is stored; a compressible one makes the whole file deflated.
    func looksIncompressible(_ src: File, size: UInt64) throws -> Bool {
        guard size >= EntryCompressor.sampleThreshold else { return false }
        let window = UInt64(EntryCompressor.sampleWindow)
        let count = UInt64(min(16, max(2, size >> 18)))
        let z = try startDeflate()
        defer { deflateEnd(z) }
        var sampled: UInt64 = 0, compressed: UInt64 = 0
        for i in 0..<count {
            let at = (size - window) / (count - 1) * i
            let n = try src.pread(into: UnsafeMutableRawBufferPointer(rebasing: buffers.input[0..<Int(window)]), at: at)
            guard n > 0 else { return false }
            deflateReset(z)
            z.pointee.next_in = buffers.input.baseAddress!.assumingMemoryBound(to: Bytef.self)
            z.pointee.avail_in = UInt32(n)
            z.pointee.next_out = buffers.output.baseAddress!.assumingMemoryBound(to: Bytef.self)
            z.pointee.avail_out = UInt32(buffers.output.count)  // 1 MiB: a window's output fits
            guard CZlib.deflate(z, Z_FINISH) == Z_STREAM_END else { return false }
            sampled += UInt64(n)
            compressed += UInt64(buffers.output.count) - UInt64(z.pointee.avail_out)
        }
        return compressed * 100 >= sampled * 98
    }

    /// The file deflated as one stream.
    private func deflate(_ src: File, size: UInt64, sha: Digest, into out: EntryOutput) throws -> CompressedEntry {
        let z = try startDeflate()
        defer { deflateEnd(z) }
        var crc: UInt = crc32(0, nil, 0)
        var total: UInt64 = 0, written: UInt64 = 0
        var flush = Z_NO_FLUSH
        while true {
            if z.pointee.avail_in == 0 && flush == Z_NO_FLUSH {
                let n = try src.pread(into: buffers.input, at: total)
                total += UInt64(n)
                if n == 0 { flush = Z_FINISH }
                let bytes = UnsafeRawBufferPointer(rebasing: buffers.input[0..<n])
                crc = crc32(crc, bytes.baseAddress?.assumingMemoryBound(to: Bytef.self), UInt32(n))
                sha.update(bytes)
                z.pointee.next_in = buffers.input.baseAddress!.assumingMemoryBound(to: Bytef.self)
                z.pointee.avail_in = UInt32(n)
            }
            if try deflateStep(flush, into: out, written: &written) == Z_STREAM_END { break }
        }
        return CompressedEntry(method: 8, crc: UInt32(truncatingIfNeeded: crc), compressedSize: written, size: total,
                               sha256: sha.finalHex(), chunks: [])
    }

    /// The file stored, hashed as it is copied.
    private func store(_ src: File, sha: Digest, into out: EntryOutput) throws -> CompressedEntry {
        let copied = try copy(src, into: out, sha: sha)
        return CompressedEntry(method: 0, crc: copied.crc, compressedSize: copied.total, size: copied.total,
                               sha256: sha.finalHex(), chunks: [])
    }

    /// Copies the file into `out` as it is; its CRC-32 (and sha256 when asked) on the way.
    private func copy(_ src: File, into out: EntryOutput, sha: Digest? = nil) throws -> (crc: UInt32, total: UInt64) {
        var crc: UInt = crc32(0, nil, 0)
        var total: UInt64 = 0
        while true {
            let n = try src.pread(into: buffers.input, at: total)
            if n == 0 { break }
            total += UInt64(n)
            let bytes = UnsafeRawBufferPointer(rebasing: buffers.input[0..<n])
            crc = crc32(crc, bytes.baseAddress!.assumingMemoryBound(to: Bytef.self), UInt32(n))
            sha?.update(bytes)
            try out.write(bytes)
        }
        return (UInt32(truncatingIfNeeded: crc), total)
    }

    /// The file cut into chunks, each deflated and followed by a full flush, or a sync flush when
    /// `linked` (the last one ends the stream).
    private func deflateChunked(_ src: File, size: UInt64, chunker: Chunker, linked: Bool, sha: Digest, into out: EntryOutput) throws -> CompressedEntry {
        let between = linked ? Z_SYNC_FLUSH : Z_FULL_FLUSH
        let z = try startDeflate()
        defer { deflateEnd(z) }
        var written: UInt64 = 0
        var entry = try cut(src, size: size, chunker: chunker, sha: sha) { chunk, last in
            let before = written
            try deflateChunk(chunk, last: last, between: between) { try out.write($0); written += UInt64($0.count) }
            return UInt32(written - before)
        }
        z.pointee.next_in = nil
        if size == 0 {
            // An empty file: one empty final block, no chunk.
            _ = try deflateStep(Z_FINISH, into: out, written: &written)
        }
        entry.method = 8
        entry.compressedSize = written
        return entry
    }

    /// A chunked file that is already compressed: stored in the same pass that cuts it.
    private func storeChunked(_ src: File, size: UInt64, chunker: Chunker, sha: Digest, into out: EntryOutput) throws -> CompressedEntry {
        try cut(src, size: size, chunker: chunker, sha: sha) { chunk, _ in
            try out.write(chunk)
            return UInt32(chunk.count)
        }
    }

    /// Cuts the file into chunks, taking its CRC-32 and sha256 and each chunk's sha256 on the
    /// way; `emit` writes a chunk (told whether it is the last) and returns its length in the
    /// entry. Returns the entry as stored; a deflated one corrects method and size.
    private func cut(_ src: File, size: UInt64, chunker: Chunker, sha: Digest,
                     emit: (UnsafeRawBufferPointer, _ last: Bool) throws -> UInt32) throws -> CompressedEntry {
        var crc: UInt = crc32(0, nil, 0)
        var total: UInt64 = 0
        var chunks: [ChunkRecord] = []
        let digest = try Digest(.sha256)
        try chunker.chunks(of: src) { chunk in
            total += UInt64(chunk.count)
            guard total <= size else { throw AssetPatchError(.io, "\(src.path): changed while it was read (more than \(size) bytes)") }
            crc = crc32(crc, chunk.baseAddress!.assumingMemoryBound(to: Bytef.self), UInt32(chunk.count))
            sha.update(chunk)
            digest.reset()
            digest.update(chunk)
            let compressed = try emit(chunk, total == size)
            chunks.append(ChunkRecord(sha256: digest.finalBytes(), size: UInt32(chunk.count), compressedSize: compressed))
        }
        return CompressedEntry(method: 0, crc: UInt32(truncatingIfNeeded: crc), compressedSize: total, size: total,
                               sha256: sha.finalHex(), chunks: chunks)
    }

    /// The compressor's stream, started for raw deflate at `level`; the caller ends it.
    func startDeflate() throws -> UnsafeMutablePointer<z_stream> {
        let z = buffers.stream
        z.initialize(to: z_stream())
        guard czlib_deflate_init_raw(z, level) == Z_OK else { throw AssetPatchError(.internal, "deflateInit2 failed") }
        return z
    }

    /// Deflates one chunk of a chunked entry into the stream started by `startDeflate`, then
    /// `between` (a full or sync flush), or ends the stream after the `last`; each piece of
    /// output goes to `emit`.
    func deflateChunk(_ chunk: UnsafeRawBufferPointer, last: Bool, between: Int32, emit: (UnsafeRawBufferPointer) throws -> Void) throws {
        let z = buffers.stream
        z.pointee.next_in = UnsafeMutablePointer(mutating: chunk.baseAddress!.assumingMemoryBound(to: Bytef.self))
        z.pointee.avail_in = UInt32(chunk.count)
        let flush = last ? Z_FINISH : between
        while true {
            z.pointee.next_out = buffers.output.baseAddress!.assumingMemoryBound(to: Bytef.self)
            z.pointee.avail_out = UInt32(buffers.output.count)
            let rc = CZlib.deflate(z, flush)
            let n = buffers.output.count - Int(z.pointee.avail_out)
            if n > 0 { try emit(UnsafeRawBufferPointer(rebasing: buffers.output[0..<n])) }
            guard rc == Z_OK || rc == Z_BUF_ERROR || rc == Z_STREAM_END else { throw AssetPatchError(.internal, "deflate failed (\(rc))") }
            if rc == Z_STREAM_END { break }
            // Done with this chunk once all input is taken and the flush fits the buffer.
            if z.pointee.avail_in == 0 && z.pointee.avail_out > 0 && !last { break }
        }
    }

    /// One deflate call into the output buffer, what it produced written to `out`. Returns
    /// zlib's code (Z_OK, Z_BUF_ERROR or Z_STREAM_END); any other is an error.
    private func deflateStep(_ flush: Int32, into out: EntryOutput, written: inout UInt64) throws -> Int32 {
        let z = buffers.stream
        z.pointee.next_out = buffers.output.baseAddress!.assumingMemoryBound(to: Bytef.self)
        z.pointee.avail_out = UInt32(buffers.output.count)
        let rc = CZlib.deflate(z, flush)
        let n = buffers.output.count - Int(z.pointee.avail_out)
        if n > 0 {
            try out.write(UnsafeRawBufferPointer(rebasing: buffers.output[0..<n]))
            written += UInt64(n)
        }
        guard rc == Z_OK || rc == Z_BUF_ERROR || rc == Z_STREAM_END else { throw AssetPatchError(.internal, "deflate failed (\(rc))") }
        return rc
    }
}
