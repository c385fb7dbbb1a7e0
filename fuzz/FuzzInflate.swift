// libFuzzer target: the project's decoders against zlib's own one-shot calls, which have room
// for everything and so no buffer boundary to get wrong.
//
// The first byte chooses the mode:
// - bit 7 clear: the input describes an entry to build. Its content (zeros, a pattern repeated
//   from the input, or the input's bytes stretched), its size near a multiple of a buffer size
//   the code has (16, 64, 256 KiB, 1 MiB, give or take up to 4 KiB), stored or deflated at a
//   level 1..9, with or without a data descriptor. zlib's `uncompress` of the same stream with a
//   zlib wrapper is the reference, and must give back the content.
// - bit 7 set: the rest of the input is raw deflate data taken as it is, with a declared size
//   from bytes 1-3; the reference is one `inflate` call with room for one byte past that size.
//   With bit 6 set too, the first bytes of it (as many as bytes 4-5 say) are the history of a
//   chunk of a linked entry (the 32 KiB before it, given as inflate's dictionary) and the rest
//   the chunk: `ChunkDecoder` must decode exactly what zlib does, as a middle chunk (not ending
//   the stream) or a last one, and refuse a record of another sha256.
//
// Invariants: the zip reader (whole entries from a file), the entry decoder fed in chunks of an
// input-chosen size (the differential receivers' path) and, in the first mode, the HTTP content
// decoder on the zlib-wrapped stream each yield exactly the reference's bytes, and succeed
// exactly when the reference does.
import Glibc
internal import CZlib

private let path = "/dev/shm/assetpatch-fuzz-inflate-\(getpid()).zip"
private let readerBuffers = ZipBuffers()

/// A one-entry zip around `stored` (method 0 or 8), optionally with a data descriptor.
private func oneEntryZip(_ stored: [UInt8], method: UInt16, crc: UInt32, size: UInt64, descriptor: Bool) -> [UInt8] {
    var out: [UInt8] = []
    let name = Array("f.bin".utf8)
    out.put32(0x0403_4b50); out.put16(20); out.put16(descriptor ? 8 : 0); out.put16(method); out.put16(0); out.put16(0x21)
    out.put32(descriptor ? 0 : crc); out.put32(descriptor ? 0 : UInt32(stored.count)); out.put32(descriptor ? 0 : UInt32(size))
    out.put16(UInt16(name.count)); out.put16(0)
    out += name
    out += stored
    if descriptor { out.put32(0x0807_4b50); out.put32(crc); out.put32(UInt32(stored.count)); out.put32(UInt32(size)) }
    let cd = out.count
    out.put32(0x0201_4b50); out.put16(3 << 8 | 20); out.put16(20); out.put16(descriptor ? 8 : 0); out.put16(method)
    out.put16(0); out.put16(0x21); out.put32(crc); out.put32(UInt32(stored.count)); out.put32(UInt32(size))
    out.put16(UInt16(name.count)); out.put16(0); out.put16(0); out.put16(0); out.put16(0)
    out.put32(0o100644 << 16); out.put32(0)
    out += name
    let cdSize = out.count - cd
    out.put32(0x0605_4b50); out.put16(0); out.put16(0); out.put16(1); out.put16(1)
    out.put32(UInt32(cdSize)); out.put32(UInt32(cd)); out.put16(0)
    return out
}

/// What the project's zip reader makes of the entry: its bytes, or nil when it refuses it.
private func viaZipReader(_ zip: [UInt8]) -> [UInt8]? {
    guard let f = try? File.open(path, O_WRONLY | O_CREAT | O_TRUNC), (try? f.write(zip)) != nil,
          let reader = try? ZipReader(path: path), reader.entries.count == 1 else { return nil }
    var out: [UInt8] = []
    do { try reader.extract(reader.entries[0], buffers: readerBuffers) { out += $0 } } catch { return nil }
    return out
}

/// What the entry decoder makes of `stored` pushed `chunk` bytes at a time.
private func viaEntryDecoder(_ stored: [UInt8], method: UInt16, size: UInt64, chunk: Int) -> [UInt8]? {
    guard let decoder = try? EntryDecoder(method: method, size: size) else { return nil }
    var out: [UInt8] = []
    do {
        var at = 0
        while at < stored.count {
            let n = min(chunk, stored.count - at)
            try stored[at..<(at + n)].withUnsafeBytes { part in try decoder.push(part) { out += $0 } }
            at += n
        }
        _ = try decoder.finish()
    } catch { return nil }
    return out
}

/// zlib's one-shot inflate of raw deflate data with room for `size + 1` bytes: the bytes when
/// the stream ends exactly at the end of the input having produced exactly `size` bytes. As a
/// chunk of a linked entry (`history` set as the dictionary, its last 32 KiB): exactly these
/// bytes give exactly `size` bytes, and the stream may go on after them (if it ends, it ends at
/// their end).
private func referenceInflate(_ stored: [UInt8], size: Int, chunkAfter history: [UInt8]? = nil) -> [UInt8]? {
    let z = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    z.initialize(to: z_stream())
    defer { inflateEnd(z); z.deallocate() }
    guard czlib_inflate_init_raw(z) == Z_OK else { return nil }
    let window = Array((history ?? []).suffix(32 << 10))
    if !window.isEmpty {
        let rc = window.withUnsafeBytes { inflateSetDictionary(z, $0.baseAddress!.assumingMemoryBound(to: Bytef.self), UInt32($0.count)) }
        guard rc == Z_OK else { return nil }
    }
    var out = [UInt8](repeating: 0, count: size + 1)
    var input = stored
    let (rc, produced, left): (Int32, Int, UInt32) = input.withUnsafeMutableBytes { inp in
        out.withUnsafeMutableBytes { o in
            z.pointee.next_in = inp.baseAddress?.assumingMemoryBound(to: Bytef.self)
            z.pointee.avail_in = UInt32(inp.count)
            z.pointee.next_out = o.baseAddress!.assumingMemoryBound(to: Bytef.self)
            z.pointee.avail_out = UInt32(o.count)
            let rc = inflate(z, history == nil ? Z_FINISH : Z_SYNC_FLUSH)
            return (rc, o.count - Int(z.pointee.avail_out), z.pointee.avail_in)
        }
    }
    let ended = rc == Z_STREAM_END || (history != nil && (rc == Z_OK || rc == Z_BUF_ERROR))
    guard ended, left == 0, produced == size else { return nil }
    return Array(out.prefix(size))
}

private func crc(_ data: [UInt8]) -> UInt32 {
    UInt32(truncatingIfNeeded: data.withUnsafeBytes { crc32(0, $0.baseAddress?.assumingMemoryBound(to: Bytef.self), UInt32($0.count)) })
}

private func check(_ what: String, _ got: [UInt8]?, _ want: [UInt8]?) {
    switch (got, want) {
    case (nil, nil): break
    case let (g?, w?): precondition(g == w, "\(what): \(g.count) bytes differ from the reference's \(w.count)")
    case (nil, _?): preconditionFailure("\(what): refused what zlib decodes")
    case (_?, nil): preconditionFailure("\(what): accepted what zlib refuses")
    }
}

private let chunks = [1, 7, 4093, 16384, 65536, 262_144, Int.max]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzInflate(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 6 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let mode = input[0]
    if mode & 0x80 != 0 {
        // Arbitrary raw deflate data against zlib's verdict.
        let declared = (Int(input[1]) | Int(input[2]) << 8 | Int(input[3] & 0x1F) << 16)  // < 2 MiB
        if mode & 0x40 != 0 && input.count >= 6 {
            // A chunk of a linked entry after its history.
            let rest = Array(input[6...])
            let split = min(rest.count, Int(input[4]) | Int(input[5]) << 8)
            let history = Array(rest[..<split]), stored = Array(rest[split...])
            let want = referenceInflate(stored, size: declared, chunkAfter: history)
            var sha = [UInt8](repeating: 0, count: 32)
            if let want, let d = try? Digest(.sha256) {
                d.update(want)
                sha = d.finalBytes()
            }
            let record = ChunkRecord(sha256: sha, size: UInt32(declared), compressedSize: UInt32(stored.count))
            let got = stored.withUnsafeBytes { c in
                history.withUnsafeBytes { h in try? ChunkDecoder.decode(c, method: 8, chunk: record, history: h) }
            }
            check("a linked chunk after \(history.count) bytes of history", got, want)
            if want != nil {
                var wrong = sha
                wrong[0] ^= 1
                let refused = stored.withUnsafeBytes { c in
                    history.withUnsafeBytes { h in
                        try? ChunkDecoder.decode(c, method: 8, chunk: ChunkRecord(sha256: wrong, size: UInt32(declared),
                                                                                 compressedSize: UInt32(stored.count)), history: h)
                    }
                }
                precondition(refused == nil, "a chunk that does not hash to its record was accepted")
            }
            return 0
        }
        let stored = Array(input[4...])
        let want = referenceInflate(stored, size: declared)
        let chunk = chunks[Int(mode) % chunks.count]
        check("decoder, chunks of \(chunk)", viaEntryDecoder(stored, method: 8, size: UInt64(declared), chunk: chunk), want)
        let entryCRC = want.map(crc) ?? 0
        check("zip reader", viaZipReader(oneEntryZip(stored, method: 8, crc: entryCRC, size: UInt64(declared), descriptor: mode & 1 != 0)), want)
        return 0
    }
    // An entry built from the input, sized near a buffer boundary.
    let boundaries = [16 << 10, 64 << 10, 256 << 10, 1 << 20]
    let multiple = Int(input[1] & 0x3) + 1
    let delta = (Int(input[2]) | Int(input[3]) << 8) % 8192 - 4096
    let contentSize = max(0, boundaries[Int(input[1] >> 2) & 3] * (input[1] >> 2 & 3 == 3 ? 1 : multiple) + delta)
    let seed = Array(input[6...])
    var content = [UInt8](repeating: 0, count: contentSize)
    switch (input[4] % 3, seed.isEmpty) {
    case (1, false):  // a pattern repeated: long matches
        for i in 0..<contentSize { content[i] = seed[i % seed.count] }
    case (2, false):  // the input's bytes stretched: runs of literals
        let run = Int(input[5] & 0x3F) + 1
        for i in 0..<contentSize { content[i] = seed[(i / run) % seed.count] }
    default: break  // zeros: the most compressible data there is
    }
    let level = Int32(mode & 0x0F) % 10  // 0: stored
    let method: UInt16 = level == 0 ? 0 : 8
    var zlibStream = [UInt8](repeating: 0, count: Int(compressBound(UInt(contentSize))) + 16)
    var zlibLength = UInt(zlibStream.count)
    let rc = zlibStream.withUnsafeMutableBytes { o in
        content.withUnsafeBytes { i in
            compress2(o.baseAddress!.assumingMemoryBound(to: Bytef.self), &zlibLength,
                      i.baseAddress?.assumingMemoryBound(to: Bytef.self), UInt(i.count), max(level, 1))
        }
    }
    precondition(rc == Z_OK, "compress2 failed")
    zlibStream = Array(zlibStream.prefix(Int(zlibLength)))
    // The reference: zlib's uncompress gives the content back.
    var back = [UInt8](repeating: 0, count: contentSize + 1)
    var backLength = UInt(back.count)
    let urc = back.withUnsafeMutableBytes { o in
        zlibStream.withUnsafeBytes { i in
            uncompress(o.baseAddress!.assumingMemoryBound(to: Bytef.self), &backLength, i.baseAddress!.assumingMemoryBound(to: Bytef.self), UInt(i.count))
        }
    }
    precondition(urc == Z_OK && Int(backLength) == contentSize && Array(back.prefix(contentSize)) == content, "zlib's own round trip failed")
    // A zip entry holds the raw stream: without the 2-byte zlib header and 4-byte Adler-32.
    let stored = level == 0 ? content : Array(zlibStream[2..<(zlibStream.count - 4)])
    let chunk = chunks[Int(input[5] >> 6) + 3]  // 16 KiB and up: megabytes in single bytes are too slow
    check("decoder, level \(level), \(contentSize) bytes, chunks of \(chunk)",
          viaEntryDecoder(stored, method: method, size: UInt64(contentSize), chunk: chunk), content)
    check("zip reader, level \(level), \(contentSize) bytes",
          viaZipReader(oneEntryZip(stored, method: method, crc: crc(content), size: UInt64(contentSize), descriptor: mode & 0x40 != 0)), content)
    if level > 0, let decoder = try? ContentDecoder(coding: "deflate", what: "fuzz") {
        var out: [UInt8] = []
        var at = 0
        do {
            while at < zlibStream.count {
                let n = min(chunk, zlibStream.count - at)
                try zlibStream[at..<(at + n)].withUnsafeBytes { part in try decoder.decode(part) { out += $0 } }
                at += n
            }
        } catch { preconditionFailure("content decoder refused a zlib stream: \(error)") }
        precondition(decoder.ended && out == content, "content decoder: \(out.count) bytes differ from the content's \(contentSize)")
    }
    return 0
}
