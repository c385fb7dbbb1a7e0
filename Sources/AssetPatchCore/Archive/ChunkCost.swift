import Glibc
internal import CZlib

/// What chunks that decode on their own would cost a file, against chunks that share history.
///
/// A full flush after each chunk resets deflate's history, so each chunk compresses as if it
/// were a file of its own: for text that takes about three times the bytes of the file deflated
/// as one stream (JSON in 8 KiB chunks), while data that deflate barely shrinks loses a few
/// percent. Chunks that share history (a sync flush) cost a few dozen bytes each whatever the
/// content. The publisher compares the two on windows spread over the file, cut by the file's
/// own chunker, and gives chunks of their own only to files where they cost little: clients
/// since 0.4 fetch those by chunk; a file whose chunks share history they fetch whole, clients
/// since 0.5 by chunk either way.
extension EntryCompressor {
    /// The most windows sampled: 8 (a quarter of the file or less from 8 windows' length up).
    static let costWindows = 8

    /// Whether chunks of their own would take more than `limitPercent`% more compressed bytes
    /// than chunks sharing history, on windows of the file spread evenly over it from its first
    /// byte to its last (16 chunks long on average and 256 KiB to 1 MiB each; at least two, one
    /// per 4 windows' length of the file, at most 8; the whole file when it is no longer than
    /// one). The result depends only on the file's bytes, the chunker, the level and the limit.
    func ownChunksCostMore(_ src: File, size: UInt64, chunker: Chunker, limitPercent: Int) throws -> Bool {
        guard size > 0 else { return false }
        let window = UInt64(min(max(16 * chunker.averageSize, 256 << 10), buffers.input.count))
        let length = min(size, window)
        let count = size <= window ? UInt64(1) : UInt64(min(UInt64(EntryCompressor.costWindows), max(2, size / (4 * window))))
        var own: UInt64 = 0, shared: UInt64 = 0
        let z = try startDeflate()
        defer { deflateEnd(z) }
        for i in 0..<count {
            let at = count == 1 ? 0 : (size - length) / (count - 1) * i
            let n = try src.pread(into: UnsafeMutableRawBufferPointer(rebasing: buffers.input[0..<Int(length)]), at: at)
            guard n > 0 else { break }
            let bytes = UnsafeRawBufferPointer(rebasing: buffers.input[0..<n])
            own += try deflatedLength(bytes, chunker: chunker, between: Z_FULL_FLUSH)
            shared += try deflatedLength(bytes, chunker: chunker, between: Z_SYNC_FLUSH)
        }
        return own * 100 > shared * UInt64(100 + max(0, limitPercent))
    }

    /// The deflated length of `bytes` cut by `chunker` (the window's end taken as the file's),
    /// with `between` after each chunk (`deflateChunk`); the output is counted, not kept.
    private func deflatedLength(_ bytes: UnsafeRawBufferPointer, chunker: Chunker, between: Int32) throws -> UInt64 {
        guard deflateReset(buffers.stream) == Z_OK else { throw AssetPatchError(.internal, "deflateReset failed") }
        var total: UInt64 = 0, at = 0
        while at < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[at...])
            let n = chunker.cut(rest, atEnd: true) ?? rest.count
            try deflateChunk(UnsafeRawBufferPointer(rebasing: rest[0..<n]), last: at + n == bytes.count, between: between) { total += UInt64($0.count) }
            at += n
        }
        return total
    }
}
