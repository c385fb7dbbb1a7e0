import Glibc
internal import CZlib

/// Writes zip archives for `publish`: deterministic (fixed timestamps, given order, the same bytes
/// whatever the number of threads compressing), ZIP64 where sizes, offsets or counts need it,
/// each entry deflated unless that saves under 5%, then stored (`EntryCompressor`).
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

    package init(path: String, level: Int32 = 6) throws {
        out = try File.open(path, O_WRONLY | O_CREAT | O_TRUNC)
        self.level = level
    }

    /// The length of the local header `localHeader` writes: known before the entry's sizes are.
    static func localHeaderLength(_ name: [UInt8], zip64: Bool) -> Int { 30 + name.count + (zip64 ? 20 : 0) }

    func localHeader(_ name: [UInt8], method: UInt16, crc: UInt32, comp: UInt64, uncomp: UInt64, zip64: Bool) -> [UInt8] {
        var h: [UInt8] = []
        h.reserveCapacity(ZipWriter.localHeaderLength(name, zip64: zip64))
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

    /// Adds the file at `sourcePath` as `name` (see `EntryCompressor`); returns its size and
    /// sha256, hashed during the same read that compresses it, and where its bytes lie.
    @discardableResult
    package func add(name: String, sourcePath: String) throws -> ManifestFile {
        try addFiles([EntrySource(name: name, path: sourcePath)], jobs: 1)[0].file
    }

    /// Adds a large file as a chunked entry (see `EntryCompressor`): returns the file and its
    /// chunks in order.
    package func addChunked(name: String, sourcePath: String, chunker: Chunker) throws -> (ManifestFile, [ChunkRecord]) {
        let added = try addFiles([EntrySource(name: name, path: sourcePath, chunker: chunker)], jobs: 1)[0]
        return (added.file, added.chunks)
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
        // A digest that could not be taken throws (an empty hex would be no digest at all).
        guard let digest = Sha256(bytes: Digest.sha256(bytes)) else { throw AssetPatchError(.internal, "sha256 of \(name) has no 32 bytes") }
        return ManifestFile(path: name, size: size, digest: digest,
                            location: ArchiveLocation(headerOffset: start, dataOffset: dataStart, compressedSize: size, method: 0))
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
