internal import CZlib

/// What went wrong inside a compressed stream; the caller names the stream in its message.
enum InflateFailure: Error, Equatable {
    /// The data does not decode (zlib's message).
    case corrupt(String)
    /// More output than allowed.
    case overrun
    /// Bytes after the end of the stream.
    case trailing
    /// The data ended before the stream did, or produced fewer bytes than declared (zip entries).
    case short(UInt64)
}

/// A zlib inflate stream fed in chunks: raw deflate (zip entries) or a zlib/gzip stream (HTTP
/// content codings). The z_stream and the output buffer live on the C heap: zlib keeps pointers
/// into the stream.
final class Inflater {
    enum Format { case raw, zlibOrGzip }

    private let stream: UnsafeMutablePointer<z_stream>
    private let output: UnsafeMutableRawBufferPointer
    private(set) var ended = false
    /// Output produced so far.
    private(set) var produced: UInt64 = 0

    init(_ format: Format, outputBytes: Int = 64 << 10) throws {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        output = .allocate(byteCount: outputBytes, alignment: 16)
        let rc = format == .raw ? czlib_inflate_init_raw(stream) : czlib_inflate_init_auto(stream)
        guard rc == Z_OK else {
            stream.deallocate()
            output.deallocate()
            throw AssetPatchError(.internal, "inflateInit2 failed")
        }
    }

    /// Ready for a new stream of the same format, keeping zlib's state and window and the
    /// output buffer: a receiver decoding a thousand entries allocates them once.
    func reset() throws {
        guard inflateReset(stream) == Z_OK else { throw AssetPatchError(.internal, "inflateReset failed") }
        ended = false
        produced = 0
    }

    /// Sets the history a raw stream's first bytes may refer back to (at most its last 32 KiB
    /// count): the bytes decoded before a chunk of an entry whose chunks share history.
    func setDictionary(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        guard inflateSetDictionary(stream, base.assumingMemoryBound(to: Bytef.self), UInt32(bytes.count)) == Z_OK else {
            throw AssetPatchError(.internal, "inflateSetDictionary failed")
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
        output.deallocate()
    }

    /// Decodes `chunk`, passing the output to `sink`. No more than `limit` bytes are produced in
    /// all: zlib is never given room for more than one byte past it, so a bomb stops at once.
    ///
    /// Every byte `chunk` decodes to is delivered before this returns: zlib is called again
    /// while it fills the output buffer to its end, also after it has consumed all the input.
    /// Output can be pending then (highly compressible data whose decoded length passes a
    /// multiple of the buffer size), and the last chunk of a stream gets no later call to
    /// deliver it.
    func push(_ chunk: UnsafeRawBufferPointer, limit: UInt64 = .max,
              _ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard chunk.count > 0, let base = chunk.baseAddress else { return }
        if ended { throw InflateFailure.trailing }
        stream.pointee.next_in = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = UInt32(chunk.count)
        defer { stream.pointee.next_in = nil; stream.pointee.avail_in = 0 }
        while !ended {
            let room = limit == .max ? UInt64(output.count) : min(UInt64(output.count), limit - min(produced, limit) + 1)
            stream.pointee.next_out = output.baseAddress!.assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_out = UInt32(room)
            let rc = inflate(stream, Z_NO_FLUSH)
            let n = Int(room) - Int(stream.pointee.avail_out)
            switch rc {
            case Z_STREAM_END: ended = true
            case Z_OK, Z_BUF_ERROR: break
            default: throw InflateFailure.corrupt(stream.pointee.msg.map { String(cString: $0) } ?? "error \(rc)")
            }
            if n > 0 {
                produced += UInt64(n)
                if produced > limit { throw InflateFailure.overrun }
                try sink(UnsafeRawBufferPointer(rebasing: output[0..<n]))
            }
            // A full output buffer may leave output pending inside zlib: call again. Otherwise
            // zlib stopped for want of input (all consumed) or could make no progress at all.
            if stream.pointee.avail_out == 0 { continue }
            if stream.pointee.avail_in == 0 || n == 0 { break }
        }
        if ended && stream.pointee.avail_in > 0 { throw InflateFailure.trailing }
    }
}

/// One zip entry's data pushed in chunks as it is read or arrives: stored or deflated, never
/// more than the declared size, its CRC-32 computed on the way unless the caller checks every
/// byte another way. `finish` checks the ending. Failures are `InflateFailure`s.
final class EntryDecoder {
    let method: UInt16
    let size: UInt64
    private let inflater: Inflater?
    private var storedBytes: UInt64 = 0
    private var crc: UInt = crc32(0, nil, 0)
    private let computesCRC: Bool

    /// `reusing`: a raw-deflate inflater to reset and use for a deflated entry, instead of a
    /// new one; it must not be decoding another entry at the same time. `crc`: false where
    /// every byte is checked against the entry's sha256 anyway (a second pass over the output
    /// that proves nothing more; `finish` returns nil then).
    init(method: UInt16, size: UInt64, reusing: Inflater? = nil, crc: Bool = true) throws {
        self.method = method
        self.size = size
        computesCRC = crc
        if method != 8 {
            inflater = nil
        } else if let reusing {
            try reusing.reset()
            inflater = reusing
        } else {
            inflater = try Inflater(.raw)
        }
    }

    var produced: UInt64 { inflater?.produced ?? storedBytes }

    /// Feeds compressed bytes; the decoded bytes go to `sink`.
    func push(_ chunk: UnsafeRawBufferPointer, _ sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard chunk.count > 0 else { return }
        try withoutActuallyEscaping(sink) { sink in
            let crcSink: (UnsafeRawBufferPointer) throws -> Void = { out in
                self.crc = crc32(self.crc, out.baseAddress!.assumingMemoryBound(to: Bytef.self), UInt32(out.count))
                try sink(out)
            }
            let out = computesCRC ? crcSink : sink
            if let inflater {
                try inflater.push(chunk, limit: size, out)
            } else {
                if storedBytes + UInt64(chunk.count) > size { throw InflateFailure.overrun }
                storedBytes += UInt64(chunk.count)
                try out(chunk)
            }
        }
    }

    /// After the last compressed byte: the stream ended with exactly `size` bytes. Returns the
    /// CRC-32 of the output (nil: not computed).
    @discardableResult
    func finish() throws -> UInt32? {
        if let inflater, !inflater.ended { throw InflateFailure.short(inflater.produced) }
        if produced != size { throw InflateFailure.short(produced) }
        return computesCRC ? UInt32(truncatingIfNeeded: crc) : nil
    }
}
