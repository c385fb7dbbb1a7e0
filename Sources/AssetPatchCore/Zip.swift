import Glibc
internal import CZlib

/// One file entry of a zip archive, as its central directory describes it, after every check.
public struct ZipEntry: Sendable {
    public var name: String
    public var method: UInt16          // 0 stored, 8 deflate
    public var crc32: UInt32
    public var compressedSize: UInt64
    public var uncompressedSize: UInt64
    public var localHeaderOffset: UInt64
    /// Where the entry's (compressed) data starts, from its local header.
    public var dataOffset: UInt64
    public var isDirectory: Bool
}

@inline(__always) func le16(_ b: [UInt8], _ o: Int) -> UInt16 { UInt16(b[o]) | UInt16(b[o + 1]) << 8 }
@inline(__always) func le32(_ b: [UInt8], _ o: Int) -> UInt32 {
    UInt32(b[o]) | UInt32(b[o + 1]) << 8 | UInt32(b[o + 2]) << 16 | UInt32(b[o + 3]) << 24
}
@inline(__always) func le64(_ b: [UInt8], _ o: Int) -> UInt64 { UInt64(le32(b, o)) | UInt64(le32(b, o + 4)) << 32 }

/// A zip reader for untrusted archives (APPNOTE 6.3): it trusts the central directory only
/// after checking it against the local headers and the file, and refuses everything an
/// updater has no use for — encryption, links and devices, unknown methods, unsafe names
/// ("zip slip"), duplicate names, and entries that overlap (the overlapping-entry zip bomb).
public final class ZipReader {
    public let file: File
    public let fileSize: UInt64
    public private(set) var entries: [ZipEntry] = []
    let source: String

    static let maxEntries = 1_000_000
    static let maxCentralDirectoryBytes: UInt64 = 512 << 20

    /// Opens and validates `path`. `source` names the archive in messages.
    public init(path: String, source: String? = nil) throws {
        self.file = try File.openRead(path)
        self.fileSize = try file.size()
        self.source = source ?? path
        try parse()
    }

    func fail(_ what: String) -> AssetPatchError { AssetPatchError(.archive, "\(source): \(what)") }

    private func read(_ count: Int, at offset: UInt64, _ what: String) throws -> [UInt8] {
        guard offset <= fileSize, UInt64(count) <= fileSize - offset else { throw fail("\(what) lies past the end of the archive") }
        return try file.preadExactly(count, at: offset, what: what)
    }

    private func parse() throws {
        guard fileSize >= 22 else { throw fail("not a zip archive (too short)") }
        // The end-of-central-directory record: the last signature whose comment ends the file.
        let tailLength = Int(min(fileSize, 22 + 65535))
        let tailStart = fileSize - UInt64(tailLength)
        let tail = try read(tailLength, at: tailStart, "end of central directory")
        var eocd = -1
        var i = tailLength - 22
        while i >= 0 {
            if tail[i] == 0x50, tail[i + 1] == 0x4B, tail[i + 2] == 0x05, tail[i + 3] == 0x06,
               i + 22 + Int(le16(tail, i + 20)) == tailLength {
                eocd = i
                break
            }
            i -= 1
        }
        guard eocd >= 0 else { throw fail("not a zip archive (no end of central directory record)") }
        let eocdOffset = tailStart + UInt64(eocd)
        if le16(tail, eocd + 4) != 0 || le16(tail, eocd + 6) != 0 { throw fail("multi-disk archives are not supported") }
        var entryCount = UInt64(le16(tail, eocd + 10))
        var cdSize = UInt64(le32(tail, eocd + 12))
        var cdOffset = UInt64(le32(tail, eocd + 16))
        var cdLimit = eocdOffset

        // ZIP64: a locator right before the EOCD points at the ZIP64 end record.
        if eocdOffset >= 20 {
            let loc = try read(20, at: eocdOffset - 20, "ZIP64 locator")
            if le32(loc, 0) == 0x0706_4b50 {
                let z64Offset = le64(loc, 8)
                guard z64Offset <= eocdOffset - 20, eocdOffset - 20 - z64Offset >= 56 else { throw fail("bad ZIP64 end of central directory offset") }
                let z = try read(56, at: z64Offset, "ZIP64 end of central directory")
                guard le32(z, 0) == 0x0606_4b50 else { throw fail("bad ZIP64 end of central directory signature") }
                if le32(z, 16) != 0 || le32(z, 20) != 0 { throw fail("multi-disk archives are not supported") }
                let n64 = le64(z, 32), size64 = le64(z, 40), off64 = le64(z, 48)
                if entryCount == 0xFFFF || entryCount == n64 { entryCount = n64 } else { throw fail("ZIP64 and classic entry counts disagree") }
                if cdSize == 0xFFFF_FFFF || cdSize == size64 { cdSize = size64 } else { throw fail("ZIP64 and classic directory sizes disagree") }
                if cdOffset == 0xFFFF_FFFF || cdOffset == off64 { cdOffset = off64 } else { throw fail("ZIP64 and classic directory offsets disagree") }
                cdLimit = z64Offset
            }
        }
        guard cdOffset <= cdLimit, cdSize <= cdLimit - cdOffset else { throw fail("central directory lies outside the archive") }
        guard cdSize <= ZipReader.maxCentralDirectoryBytes else { throw fail("central directory larger than \(ZipReader.maxCentralDirectoryBytes) bytes") }
        guard entryCount <= UInt64(ZipReader.maxEntries) else { throw fail("more than \(ZipReader.maxEntries) entries") }
        guard entryCount * 46 <= cdSize else { throw fail("central directory too small for \(entryCount) entries") }

        let cd = try read(Int(cdSize), at: cdOffset, "central directory")
        var pos = 0
        var names = Set<String>()
        entries.reserveCapacity(Int(entryCount))
        for index in 0..<Int(entryCount) {
            guard pos + 46 <= cd.count, le32(cd, pos) == 0x0201_4b50 else { throw fail("central directory entry \(index) is malformed") }
            let madeBy = le16(cd, pos + 4)
            let flags = le16(cd, pos + 8)
            let method = le16(cd, pos + 10)
            let crc = le32(cd, pos + 16)
            var compSize = UInt64(le32(cd, pos + 20))
            var uncompSize = UInt64(le32(cd, pos + 24))
            let nameLen = Int(le16(cd, pos + 28))
            let extraLen = Int(le16(cd, pos + 30))
            let commentLen = Int(le16(cd, pos + 32))
            let diskStart = le16(cd, pos + 34)
            let external = le32(cd, pos + 38)
            var localOffset = UInt64(le32(cd, pos + 42))
            let end = pos + 46 + nameLen + extraLen + commentLen
            guard end <= cd.count else { throw fail("central directory entry \(index) runs past the directory") }
            let nameBytes = Array(cd[(pos + 46)..<(pos + 46 + nameLen)])
            let extra = Array(cd[(pos + 46 + nameLen)..<(pos + 46 + nameLen + extraLen)])
            pos = end

            let shownName = String(decoding: nameBytes, as: UTF8.self)
            let isDirectory = nameBytes.last == UInt8(ascii: "/")
            let checked = isDirectory ? Array(nameBytes.dropLast()) : nameBytes
            let safe = checked.withUnsafeBytes { ResourceName.isValid($0) }
            guard safe, let name = String(validating: nameBytes, as: UTF8.self) else {
                throw fail("entry \(index) has an unsafe name \"\(shownName)\"")
            }
            if flags & 0x0001 != 0 || flags & 0x0040 != 0 { throw fail("entry \"\(name)\" is encrypted") }
            if method != 0 && method != 8 { throw fail("entry \"\(name)\" uses unsupported compression method \(method)") }
            // Unix mode bits live in the high half of the external attributes (made by Unix = 3).
            if madeBy >> 8 == 3 {
                let type = (external >> 16) & 0o170000
                if type != 0 && type != 0o100000 && type != 0o040000 {
                    throw fail("entry \"\(name)\" is a link or special file, not a regular file")
                }
            }

            // ZIP64 extended information: only the fields whose classic value is 0xFFFFFFFF.
            if compSize == 0xFFFF_FFFF || uncompSize == 0xFFFF_FFFF || localOffset == 0xFFFF_FFFF || diskStart == 0xFFFF {
                guard let z = ZipReader.zip64Field(extra) else { throw fail("entry \"\(name)\" lacks its ZIP64 extra field") }
                var o = 0
                func take() throws -> UInt64 {
                    guard o + 8 <= z.count else { throw fail("entry \"\(name)\" has a short ZIP64 extra field") }
                    defer { o += 8 }
                    return le64(z, o)
                }
                if uncompSize == 0xFFFF_FFFF { uncompSize = try take() }
                if compSize == 0xFFFF_FFFF { compSize = try take() }
                if localOffset == 0xFFFF_FFFF { localOffset = try take() }
            }
            if diskStart != 0 && diskStart != 0xFFFF { throw fail("multi-disk archives are not supported") }
            if method == 0 && compSize != uncompSize { throw fail("stored entry \"\(name)\" has different sizes") }
            guard names.insert(name).inserted else { throw fail("duplicate entry \"\(name)\"") }

            // The local header must agree with the central directory.
            guard localOffset <= cdOffset, cdOffset - localOffset >= 30 else { throw fail("entry \"\(name)\" has a local header outside the data area") }
            let local = try read(30, at: localOffset, "local header of \"\(name)\"")
            guard le32(local, 0) == 0x0403_4b50 else { throw fail("entry \"\(name)\" has a bad local header signature") }
            let localFlags = le16(local, 6)
            let localMethod = le16(local, 8)
            let localNameLen = Int(le16(local, 26))
            let localExtraLen = Int(le16(local, 28))
            if localMethod != method || (localFlags & 0x0041) != (flags & 0x0041) {
                throw fail("entry \"\(name)\": local and central headers disagree")
            }
            if localNameLen != nameLen { throw fail("entry \"\(name)\": local and central names disagree") }
            let localName = try read(localNameLen, at: localOffset + 30, "local name of \"\(name)\"")
            if localName != nameBytes { throw fail("entry \"\(name)\": local and central names disagree") }
            if localFlags & 0x0008 == 0 {
                // No data descriptor: the local header carries crc and sizes (0xFFFFFFFF: in ZIP64 extra).
                let lcrc = le32(local, 14), lcomp = le32(local, 18), luncomp = le32(local, 22)
                let compOK = lcomp == 0xFFFF_FFFF || UInt64(lcomp) == compSize
                let uncompOK = luncomp == 0xFFFF_FFFF || UInt64(luncomp) == uncompSize
                if lcrc != crc || !compOK || !uncompOK { throw fail("entry \"\(name)\": local and central headers disagree") }
            }
            let dataOffset = localOffset + 30 + UInt64(localNameLen) + UInt64(localExtraLen)
            guard dataOffset <= cdOffset, compSize <= cdOffset - dataOffset else {
                throw fail("entry \"\(name)\" data runs past the data area")
            }
            entries.append(ZipEntry(name: isDirectory ? String(name.dropLast()) : name, method: method, crc32: crc,
                                    compressedSize: compSize, uncompressedSize: uncompSize,
                                    localHeaderOffset: localOffset, dataOffset: dataOffset, isDirectory: isDirectory))
        }

        // Entries may not share bytes: each one's data must end before the next local header.
        let byOffset = entries.sorted { $0.localHeaderOffset < $1.localHeaderOffset }
        for k in 1..<max(1, byOffset.count) {
            let prev = byOffset[k - 1], next = byOffset[k]
            if prev.dataOffset + prev.compressedSize > next.localHeaderOffset {
                throw fail("entries \"\(prev.name)\" and \"\(next.name)\" overlap")
            }
        }
    }

    /// The file entries in data order, after checking them against a manifest's files: every
    /// entry listed (`ERR_ARCHIVE`), every listed file present (`ERR_ARCHIVE`), declared sizes as
    /// listed (`ERR_INTEGRITY`). Content hashes are checked as entries are extracted.
    public func fileEntries(matching files: [ManifestFile]) throws -> [ZipEntry] {
        let entries = fileEntries
        let expected = Dictionary(files.map { ($0.path, $0.size) }, uniquingKeysWith: { a, _ in a })
        for e in entries {
            guard let size = expected[e.name] else { throw fail("entry \"\(e.name)\" is not listed in the manifest") }
            if e.uncompressedSize != size {
                throw AssetPatchError(.integrity, "\(source): entry \"\(e.name)\" is \(e.uncompressedSize) bytes, the manifest says \(size)")
            }
        }
        let present = Set(entries.map(\.name))
        for f in files where !present.contains(f.path) {
            throw fail("\"\(f.path)\" is listed in the manifest but missing from the archive")
        }
        return entries
    }

    /// The file entries (directories left out), in the order their data lies in the archive.
    public var fileEntries: [ZipEntry] {
        entries.filter { !$0.isDirectory }.sorted { $0.dataOffset < $1.dataOffset }
    }

    static func zip64Field(_ extra: [UInt8]) -> [UInt8]? {
        var o = 0
        while o + 4 <= extra.count {
            let id = le16(extra, o), len = Int(le16(extra, o + 2))
            guard o + 4 + len <= extra.count else { return nil }
            if id == 0x0001 { return Array(extra[(o + 4)..<(o + 4 + len)]) }
            o += 4 + len
        }
        return nil
    }

    /// Streams an entry's uncompressed bytes to `sink`, never producing more than
    /// `entry.uncompressedSize` bytes (inflation stops there: `ERR_ARCHIVE`), and checks the
    /// CRC-32 (`ERR_INTEGRITY`). `buffers` are reused across calls.
    public func extract(_ entry: ZipEntry, buffers: ZipBuffers, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        var crc: UInt = crc32(0, nil, 0)
        var produced: UInt64 = 0
        var offset = entry.dataOffset
        var remaining = entry.compressedSize
        let input = buffers.input, output = buffers.output

        if entry.method == 0 {
            while remaining > 0 {
                let want = Int(min(UInt64(input.count), remaining))
                let n = try file.pread(into: UnsafeMutableRawBufferPointer(rebasing: input[0..<want]), at: offset)
                if n != want { throw fail("entry \"\(entry.name)\" is truncated") }
                let chunk = UnsafeRawBufferPointer(rebasing: input[0..<n])
                crc = crc32(crc, chunk.baseAddress!.assumingMemoryBound(to: Bytef.self), UInt32(n))
                try sink(chunk)
                offset += UInt64(n)
                remaining -= UInt64(n)
                produced += UInt64(n)
            }
        } else {
            let z = buffers.stream
            z.initialize(to: z_stream())
            guard czlib_inflate_init_raw(z) == Z_OK else { throw AssetPatchError(.internal, "inflateInit2 failed") }
            defer { inflateEnd(z) }
            var finished = false
            while !finished {
                if z.pointee.avail_in == 0 && remaining > 0 {
                    let want = Int(min(UInt64(input.count), remaining))
                    let n = try file.pread(into: UnsafeMutableRawBufferPointer(rebasing: input[0..<want]), at: offset)
                    if n != want { throw fail("entry \"\(entry.name)\" is truncated") }
                    offset += UInt64(n)
                    remaining -= UInt64(n)
                    z.pointee.next_in = input.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    z.pointee.avail_in = UInt32(n)
                }
                // Never let zlib write past the declared size (+1 byte to detect the overrun).
                let room = min(UInt64(output.count), entry.uncompressedSize - produced + 1)
                z.pointee.next_out = output.baseAddress!.assumingMemoryBound(to: Bytef.self)
                z.pointee.avail_out = UInt32(room)
                let hadInput = z.pointee.avail_in
                let rc = inflate(z, Z_NO_FLUSH)
                let n = Int(room) - Int(z.pointee.avail_out)
                switch rc {
                case Z_STREAM_END: finished = true
                case Z_OK: break
                case Z_BUF_ERROR:
                    if hadInput == 0 && remaining == 0 { throw fail("entry \"\(entry.name)\" has a truncated deflate stream") }
                default:
                    let msg = z.pointee.msg.map { String(cString: $0) } ?? "error \(rc)"
                    throw fail("entry \"\(entry.name)\" has corrupt deflate data (\(msg))")
                }
                if n > 0 {
                    produced += UInt64(n)
                    if produced > entry.uncompressedSize {
                        throw fail("entry \"\(entry.name)\" inflates past its declared size of \(entry.uncompressedSize) bytes")
                    }
                    let chunk = UnsafeRawBufferPointer(rebasing: output[0..<n])
                    crc = crc32(crc, chunk.baseAddress!.assumingMemoryBound(to: Bytef.self), UInt32(n))
                    try sink(chunk)
                } else if rc == Z_OK && hadInput == 0 && remaining == 0 {
                    throw fail("entry \"\(entry.name)\" has a truncated deflate stream")
                }
            }
            if remaining != 0 || z.pointee.avail_in != 0 {
                throw fail("entry \"\(entry.name)\" has data after the end of its deflate stream")
            }
        }
        if produced != entry.uncompressedSize {
            throw fail("entry \"\(entry.name)\" inflates to \(produced) bytes, not its declared \(entry.uncompressedSize)")
        }
        if UInt32(truncatingIfNeeded: crc) != entry.crc32 {
            throw AssetPatchError(.integrity, "\(source): entry \"\(entry.name)\" fails its CRC-32 check")
        }
    }
}

/// Reusable buffers and a heap-allocated z_stream (zlib keeps pointers into it).
public final class ZipBuffers {
    let input: UnsafeMutableRawBufferPointer
    let output: UnsafeMutableRawBufferPointer
    let stream: UnsafeMutablePointer<z_stream>

    public init(size: Int = 256 << 10) {
        input = .allocate(byteCount: size, alignment: 16)
        output = .allocate(byteCount: size, alignment: 16)
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
    }

    deinit {
        input.deallocate()
        output.deallocate()
        stream.deallocate()
    }
}

/// Writes zip archives for `publish`: deterministic (fixed timestamps, given order), ZIP64 where
/// sizes, offsets or counts need it, each entry deflated unless that saves under 5%, then stored.
public final class ZipWriter {
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

    public init(path: String, level: Int32 = 6) throws {
        out = try File.open(path, O_WRONLY | O_CREAT | O_TRUNC)
        self.level = level
    }

    private func localHeader(_ name: [UInt8], method: UInt16, crc: UInt32, comp: UInt64, uncomp: UInt64, zip64: Bool) -> [UInt8] {
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
    /// same read that compresses it.
    @discardableResult
    public func add(name: String, sourcePath: String) throws -> (size: UInt64, sha256: String) {
        let nameBytes = Array(name.utf8)
        let src = try File.openRead(sourcePath)
        let size = try src.size()
        let zip64 = size >= 0xFFFF_0000  // deflate may grow a little: decide before writing
        let start = offset
        let header = localHeader(nameBytes, method: 8, crc: 0, comp: 0, uncomp: size, zip64: zip64)
        try out.pwrite(header.withUnsafeBytes { $0 }, at: start)
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
        try out.pwrite(final.withUnsafeBytes { $0 }, at: start)
        offset = dataStart + comp
        written.append(Written(name: nameBytes, method: method, crc: crc, compressed: comp, uncompressed: size, offset: start))
        return (size, sha.finalHex())
    }

    private func store(_ src: File, to at: UInt64) throws -> (UInt32, UInt64) {
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
            z.pointee.next_out = buffers.output.baseAddress!.assumingMemoryBound(to: Bytef.self)
            z.pointee.avail_out = UInt32(buffers.output.count)
            let rc = CZlib.deflate(z, flush)
            let n = buffers.output.count - Int(z.pointee.avail_out)
            if n > 0 {
                try out.pwrite(UnsafeRawBufferPointer(rebasing: buffers.output[0..<n]), at: pos)
                pos += UInt64(n)
            }
            if rc == Z_STREAM_END { break }
            if rc != Z_OK && rc != Z_BUF_ERROR { throw AssetPatchError(.internal, "deflate failed (\(rc))") }
        }
        return (UInt32(truncatingIfNeeded: crc), pos - at)
    }

    /// Writes the central directory and end records, and fsyncs.
    public func finish() throws {
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
                try out.pwrite(cd.withUnsafeBytes { $0 }, at: offset)
                offset += UInt64(cd.count)
                cd.removeAll(keepingCapacity: true)
            }
        }
        try out.pwrite(cd.withUnsafeBytes { $0 }, at: offset)
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
        try out.pwrite(tail.withUnsafeBytes { $0 }, at: offset)
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
