import Glibc
internal import CZlib

/// Writes zip archives for `publish`: deterministic (fixed timestamps, given order), ZIP64 where
/// sizes, offsets or counts need it, each entry deflated unless that saves under 5%, then stored.
package final class ZipWriter {
    struct Written {
        var name: [UInt8]
        var method: UInt16
        var crc: UInt32
        var compressed: UInt64
        var uncompressed: UInt64
        var offset: UInt64
    }

    let out: File
    var offset: UInt64 = 0
    var written: [Written] = []
    let level: Int32
    let buffers = ZipBuffers(size: 1 << 20)

    package init(path: String, level: Int32 = 6) throws {
        out = try File.open(path, O_WRONLY | O_CREAT | O_TRUNC)
        self.level = level
    }

    func localHeader(_ name: [UInt8], method: UInt16, crc: UInt32, comp: UInt64, uncomp: UInt64, zip64: Bool) -> [UInt8] {
        var h: [UInt8] = []
        h.reserveCapacity(30 + name.count + 20)
        h.put32(0x0403_4b50)
        h.put16(zip64 ? 45 : 20)
        h.put16(ZipWriter.flags(name))
        h.put16(method)
        h.put16(0); h.put16(0x21)  // 1980-01-01 00:00: reproducible archives
        h.put32(crc)
        h.put32(zip64 ? 0xFFFF_FFFF : UInt32(comp))
        h.put32(zip64 ? 0xFFFF_FFFF : UInt32(uncomp))
        h.put16(UInt16(name.count))
        h.put16(zip64 ? 20 : 0)
        h += name
        if zip64 {
            h.put16(1); h.put16(16)
            h.put64(uncomp); h.put64(comp)
        }
        return h
    }

    static func flags(_ name: [UInt8]) -> UInt16 { name.contains { $0 >= 0x80 } ? 0x0800 : 0 }

    /// Adds the file at `sourcePath` as `name`; returns its size and sha256, hashed during the
    /// same read that compresses it, and where its bytes lie in the archive.
    @discardableResult
    package func add(name: String, sourcePath: String) throws -> ManifestFile {
        let nameBytes = Array(name.utf8)
        let src = try File.openRead(sourcePath)
        let size = try src.size()
        let zip64 = size >= 0xFFFF_0000  // deflate may grow a little: decide before writing
        let start = offset
        let header = localHeader(nameBytes, method: 8, crc: 0, comp: 0, uncomp: size, zip64: zip64)
        try out.pwrite(header, at: start)
        let dataStart = start + UInt64(header.count)

        // First try deflate; if it does not save 5%, rewrite the entry stored.
        let sha = try Digest(.sha256)
        var (crc, comp) = try deflate(src, to: dataStart, hashing: sha)
        var method: UInt16 = 8
        if size == 0 || Double(comp) > Double(size) * 0.95 {
            method = 0
            try out.truncate(to: dataStart)
            (crc, comp) = try store(src, to: dataStart)
        }
        let final = localHeader(nameBytes, method: method, crc: crc, comp: comp, uncomp: size, zip64: zip64)
        try out.pwrite(final, at: start)
        offset = dataStart + comp
        written.append(Written(name: nameBytes, method: method, crc: crc, compressed: comp, uncompressed: size, offset: start))
        return ManifestFile(path: name, size: size, sha256: sha.finalHex(),
                            location: ArchiveLocation(headerOffset: start, dataOffset: dataStart, compressedSize: comp, method: method))
    }

    /// Adds `bytes` as a stored entry `name` (the release index: its pages are compressed each
    /// on its own, and are fetched by ranges of this entry).
    @discardableResult
    package func addStored(name: String, bytes: [UInt8]) throws -> ManifestFile {
        let nameBytes = Array(name.utf8)
        let size = UInt64(bytes.count)
        let zip64 = size >= 0xFFFF_0000
        let crc = UInt32(truncatingIfNeeded: bytes.withUnsafeBytes { crc32(0, $0.baseAddress?.assumingMemoryBound(to: Bytef.self), UInt32($0.count)) })
        let start = offset
        let header = localHeader(nameBytes, method: 0, crc: crc, comp: size, uncomp: size, zip64: zip64)
        try out.pwrite(header, at: start)
        let dataStart = start + UInt64(header.count)
        try out.pwrite(bytes, at: dataStart)
        offset = dataStart + size
        written.append(Written(name: nameBytes, method: 0, crc: crc, compressed: size, uncompressed: size, offset: start))
        return ManifestFile(path: name, size: size, sha256: Digest.sha256Hex(bytes),
                            location: ArchiveLocation(headerOffset: start, dataOffset: dataStart, compressedSize: size, method: 0))
    }

    func store(_ src: File, to at: UInt64) throws -> (UInt32, UInt64) {
        var crc: UInt = crc32(0, nil, 0)
        var pos = at
        var readOffset: UInt64 = 0
        while true {
            let n = try src.pread(into: buffers.input, at: readOffset)
            if n == 0 { break }
            readOffset += UInt64(n)
            crc = crc32(crc, buffers.input.baseAddress!.assumingMemoryBound(to: Bytef.self), UInt32(n))
            try out.pwrite(UnsafeRawBufferPointer(rebasing: buffers.input[0..<n]), at: pos)
            pos += UInt64(n)
        }
        return (UInt32(truncatingIfNeeded: crc), pos - at)
    }

    private func deflate(_ src: File, to at: UInt64, hashing sha: Digest) throws -> (UInt32, UInt64) {
        let z = buffers.stream
        z.initialize(to: z_stream())
        guard czlib_deflate_init_raw(z, level) == Z_OK else { throw AssetPatchError(.internal, "deflateInit2 failed") }
        defer { deflateEnd(z) }
        var crc: UInt = crc32(0, nil, 0)
        var pos = at
        var readOffset: UInt64 = 0
        var flush = Z_NO_FLUSH
        while true {
            if z.pointee.avail_in == 0 && flush == Z_NO_FLUSH {
                let n = try src.pread(into: buffers.input, at: readOffset)
                readOffset += UInt64(n)
                if n == 0 { flush = Z_FINISH }
                crc = crc32(crc, buffers.input.baseAddress!.assumingMemoryBound(to: Bytef.self), UInt32(n))
                sha.update(UnsafeRawBufferPointer(rebasing: buffers.input[0..<n]))
                z.pointee.next_in = buffers.input.baseAddress!.assumingMemoryBound(to: Bytef.self)
                z.pointee.avail_in = UInt32(n)
            }
            if try deflateStep(flush, at: &pos) == Z_STREAM_END { break }
        }
        return (UInt32(truncatingIfNeeded: crc), pos - at)
    }

    /// One deflate call of the writer's stream into its output buffer, the output written at
    /// `pos` (which advances). Returns zlib's code (Z_OK, Z_BUF_ERROR or Z_STREAM_END); any
    /// other is an error.
    func deflateStep(_ flush: Int32, at pos: inout UInt64) throws -> Int32 {
        let z = buffers.stream
        z.pointee.next_out = buffers.output.baseAddress!.assumingMemoryBound(to: Bytef.self)
        z.pointee.avail_out = UInt32(buffers.output.count)
        let rc = CZlib.deflate(z, flush)
        let n = buffers.output.count - Int(z.pointee.avail_out)
        if n > 0 {
            try out.pwrite(UnsafeRawBufferPointer(rebasing: buffers.output[0..<n]), at: pos)
            pos += UInt64(n)
        }
        guard rc == Z_OK || rc == Z_BUF_ERROR || rc == Z_STREAM_END else { throw AssetPatchError(.internal, "deflate failed (\(rc))") }
        return rc
    }

    /// Writes the central directory and end records, and fsyncs.
    package func finish() throws {
        let cdStart = offset
        var cd: [UInt8] = []
        for w in written {
            let big = w.compressed >= 0xFFFF_FFFF || w.uncompressed >= 0xFFFF_FFFF || w.offset >= 0xFFFF_FFFF
            var extra: [UInt8] = []
            if big {
                extra.put16(1); extra.put16(24)
                extra.put64(w.uncompressed); extra.put64(w.compressed); extra.put64(w.offset)
            }
            cd.put32(0x0201_4b50)
            cd.put16(3 << 8 | (big ? 45 : 20))  // made by Unix
            cd.put16(big ? 45 : 20)
            cd.put16(ZipWriter.flags(w.name))
            cd.put16(w.method)
            cd.put16(0); cd.put16(0x21)
            cd.put32(w.crc)
            cd.put32(big ? 0xFFFF_FFFF : UInt32(w.compressed))
            cd.put32(big ? 0xFFFF_FFFF : UInt32(w.uncompressed))
            cd.put16(UInt16(w.name.count))
            cd.put16(UInt16(extra.count))
            cd.put16(0); cd.put16(0); cd.put16(0)
            cd.put32(0o100644 << 16)
            cd.put32(big ? 0xFFFF_FFFF : UInt32(w.offset))
            cd += w.name
            cd += extra
            if cd.count >= 1 << 20 {
                try out.pwrite(cd, at: offset)
                offset += UInt64(cd.count)
                cd.removeAll(keepingCapacity: true)
            }
        }
        try out.pwrite(cd, at: offset)
        offset += UInt64(cd.count)
        let cdSize = offset - cdStart
        let count = UInt64(written.count)
        var tail: [UInt8] = []
        let need64 = count >= 0xFFFF || cdSize >= 0xFFFF_FFFF || cdStart >= 0xFFFF_FFFF
        if need64 {
            let z64 = offset
            tail.put32(0x0606_4b50); tail.put64(44)
            tail.put16(3 << 8 | 45); tail.put16(45)
            tail.put32(0); tail.put32(0)
            tail.put64(count); tail.put64(count); tail.put64(cdSize); tail.put64(cdStart)
            tail.put32(0x0706_4b50); tail.put32(0); tail.put64(z64); tail.put32(1)
        }
        tail.put32(0x0605_4b50)
        tail.put16(0); tail.put16(0)
        tail.put16(need64 ? 0xFFFF : UInt16(count)); tail.put16(need64 ? 0xFFFF : UInt16(count))
        tail.put32(need64 ? 0xFFFF_FFFF : UInt32(cdSize))
        tail.put32(need64 ? 0xFFFF_FFFF : UInt32(cdStart))
        tail.put16(0)
        try out.pwrite(tail, at: offset)
        offset += UInt64(tail.count)
        try out.truncate(to: offset)
        try out.sync()
    }
}

extension Array where Element == UInt8 {
    mutating func put16(_ v: UInt16) { append(UInt8(v & 0xFF)); append(UInt8(v >> 8)) }
    mutating func put32(_ v: UInt32) { for s in stride(from: 0, to: 32, by: 8) { append(UInt8(v >> UInt32(s) & 0xFF)) } }
    mutating func put64(_ v: UInt64) { for s in stride(from: 0, to: 64, by: 8) { append(UInt8(v >> UInt64(s) & 0xFF)) } }
}
