import Glibc
internal import CZlib

/// One file entry of a zip archive, as its central directory describes it, after every check.
package struct ZipEntry: Sendable {
    package var name: String
    package var method: UInt16          // 0 stored, 8 deflate
    package var crc32: UInt32
    package var compressedSize: UInt64
    package var uncompressedSize: UInt64
    package var localHeaderOffset: UInt64
    /// Where the entry's (compressed) data starts, from its local header.
    package var dataOffset: UInt64
    package var isDirectory: Bool
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
package final class ZipReader {
    package let file: File
    package let fileSize: UInt64
    package private(set) var entries: [ZipEntry] = []
    let source: String

    /// Four times the largest catalog measured (a million files): the central directory's
    /// own limit bounds the rest.
    static let maxEntries = 4_000_000
    /// Bytes after the end record that are passed over (bsdtar pads to 10 KiB blocks).
    static let maxTrailingBytes = 65536
    static let maxCentralDirectoryBytes: UInt64 = 512 << 20

    /// Opens and validates `path`. `source` names the archive in messages.
    package init(path: String, source: String? = nil) throws {
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

    /// Where the central directory is, from the end records.
    private struct Directory {
        var entryCount: UInt64
        var size: UInt64
        var offset: UInt64
    }

    /// The end-of-central-directory record is searched for as Info-ZIP, Python, Go, libarchive
    /// and 7-Zip search for it: backwards from the end, allowing bytes after it (padding to a
    /// block size, appended junk, a comment longer than its length field says). A signature
    /// inside a comment or junk is passed over unless the directory it describes is plausible:
    /// inside the file, before the record, starting with a central header.
    private func locateDirectory() throws -> Directory {
        guard fileSize >= 22 else { throw fail("not a zip archive (too short)") }
        let tailLength = Int(min(fileSize, UInt64(22 + 65535 + ZipReader.maxTrailingBytes)))
        let tailStart = fileSize - UInt64(tailLength)
        let tail = try read(tailLength, at: tailStart, "end of central directory")
        var firstProblem: AssetPatchError?
        var i = tailLength - 22
        while i >= 0 {
            if tail[i] == 0x50, tail[i + 1] == 0x4B, tail[i + 2] == 0x05, tail[i + 3] == 0x06,
               i + 22 + Int(le16(tail, i + 20)) <= tailLength {
                do {
                    return try directory(endRecord: Array(tail[i..<i + 22]), at: tailStart + UInt64(i))
                } catch let e as AssetPatchError {
                    if firstProblem == nil { firstProblem = e }
                }
            }
            i -= 1
        }
        throw firstProblem ?? fail("not a zip archive (no end of central directory record)")
    }

    /// Reads the directory's position from a candidate end record at `eocdOffset` (and the
    /// ZIP64 end record it defers to), checking that it is plausible.
    private func directory(endRecord r: [UInt8], at eocdOffset: UInt64) throws -> Directory {
        let disk = le16(r, 4), cdDisk = le16(r, 6)
        // 0xFFFF in the disk fields means "see the ZIP64 end record", like the other fields.
        let deferred = disk == 0xFFFF && cdDisk == 0xFFFF
        if !deferred && (disk != 0 || cdDisk != 0) { throw fail("multi-disk archives are not supported") }
        var d = Directory(entryCount: UInt64(le16(r, 10)), size: UInt64(le32(r, 12)), offset: UInt64(le32(r, 16)))
        var cdLimit = eocdOffset

        // ZIP64: a locator right before the end record points at the ZIP64 end record.
        var zip64 = false
        if eocdOffset >= 20 {
            let loc = try read(20, at: eocdOffset - 20, "ZIP64 locator")
            if le32(loc, 0) == 0x0706_4b50 {
                zip64 = true
                let z64Offset = le64(loc, 8)
                guard z64Offset <= eocdOffset - 20, eocdOffset - 20 - z64Offset >= 56 else { throw fail("bad ZIP64 end of central directory offset") }
                let z = try read(56, at: z64Offset, "ZIP64 end of central directory")
                guard le32(z, 0) == 0x0606_4b50 else { throw fail("bad ZIP64 end of central directory signature") }
                if le32(z, 16) != 0 || le32(z, 20) != 0 || le32(loc, 4) != 0 { throw fail("multi-disk archives are not supported") }
                let n64 = le64(z, 32), size64 = le64(z, 40), off64 = le64(z, 48)
                if d.entryCount == 0xFFFF || d.entryCount == n64 { d.entryCount = n64 } else { throw fail("ZIP64 and classic entry counts disagree") }
                if d.size == 0xFFFF_FFFF || d.size == size64 { d.size = size64 } else { throw fail("ZIP64 and classic directory sizes disagree") }
                if d.offset == 0xFFFF_FFFF || d.offset == off64 { d.offset = off64 } else { throw fail("ZIP64 and classic directory offsets disagree") }
                cdLimit = z64Offset
            }
        }
        if deferred && !zip64 { throw fail("multi-disk archives are not supported") }
        guard d.offset <= cdLimit, d.size <= cdLimit - d.offset else { throw fail("central directory lies outside the archive") }
        guard d.size <= ZipReader.maxCentralDirectoryBytes else { throw fail("central directory larger than \(ZipReader.maxCentralDirectoryBytes) bytes") }
        guard d.entryCount <= UInt64(ZipReader.maxEntries) else { throw fail("more than \(ZipReader.maxEntries) entries") }
        guard d.entryCount * 46 <= d.size else { throw fail("central directory too small for \(d.entryCount) entries") }
        if d.entryCount > 0, le32(try read(4, at: d.offset, "central directory"), 0) != 0x0201_4b50 {
            throw fail("central directory entry 0 is malformed")
        }
        return d
    }

    private func parse() throws {
        let directory = try locateDirectory()
        let entryCount = directory.entryCount, cdOffset = directory.offset, cdSize = directory.size
        let cd = try read(Int(cdSize), at: cdOffset, "central directory")
        var pos = 0
        var names = Set<String>()
        entries.reserveCapacity(Int(entryCount))
        for index in 0..<Int(entryCount) {
            guard pos + 46 <= cd.count, le32(cd, pos) == 0x0201_4b50 else { throw fail("central directory entry \(index) is malformed") }
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
            // Unix mode bits live in the high half of the external attributes. They are read
            // whatever the creator the entry claims (zippers on Windows and macOS store Unix
            // modes too, and a link marked by a "DOS" creator is still a link to some unzippers),
            // and so is the Windows reparse-point attribute, which marks links and junctions.
            let type = (external >> 16) & 0o170000
            if (type != 0 && type != 0o100000 && type != 0o040000) || external & 0x400 != 0 {
                throw fail("entry \"\(name)\" is a link or special file, not a regular file")
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
    /// listed (`ERR_INTEGRITY`), locations, where the manifest gives them, as in the archive
    /// (`ERR_MANIFEST`). Content hashes are checked as entries are extracted.
    package func fileEntries(matching files: [ManifestFile]) throws -> [ZipEntry] {
        // The release index (format 2) is not a resource: never matched, never extracted.
        let entries = fileEntries.filter { $0.name != ManifestFile.indexEntryName }
        // By number, not by file: a dictionary of 100,000 files was 27 MB, of their numbers 5 MB.
        let expected = Dictionary(files.indices.map { (files[$0].path, Int32($0)) }, uniquingKeysWith: { a, _ in a })
        for e in entries {
            guard let n = expected[e.name] else { throw fail("entry \"\(e.name)\" is not listed in the manifest") }
            let f = files[Int(n)]
            if e.uncompressedSize != f.size {
                throw AssetPatchError(.integrity, "\(source): entry \"\(e.name)\" is \(e.uncompressedSize) bytes, the manifest says \(f.size)")
            }
            // The manifest's location is what a range request would fetch: it must be the entry's.
            if let l = f.location, l != ArchiveLocation(headerOffset: e.localHeaderOffset, dataOffset: e.dataOffset,
                                                         compressedSize: e.compressedSize, method: e.method) {
                throw AssetPatchError(.manifest, "\(source): the manifest's zip location of \"\(e.name)\" (header \(l.headerOffset), data \(l.dataOffset), \(l.compressedSize) bytes, method \(l.method)) disagrees with the archive's (header \(e.localHeaderOffset), data \(e.dataOffset), \(e.compressedSize) bytes, method \(e.method))")
            }
        }
        let present = Set(entries.map(\.name))
        for f in files where !present.contains(f.path) {
            throw fail("\"\(f.path)\" is listed in the manifest but missing from the archive")
        }
        return entries
    }

    /// The file entries (directories left out), in the order their data lies in the archive.
    package var fileEntries: [ZipEntry] {
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
    package func extract(_ entry: ZipEntry, buffers: ZipBuffers, sink: (UnsafeRawBufferPointer) throws -> Void) throws {
        let decoder = try EntryDecoder(method: entry.method, size: entry.uncompressedSize)
        var offset = entry.dataOffset
        var remaining = entry.compressedSize
        let input = buffers.input
        let crc: UInt32?
        do {
            while remaining > 0 {
                let want = Int(min(UInt64(input.count), remaining))
                let n = try file.pread(into: UnsafeMutableRawBufferPointer(rebasing: input[0..<want]), at: offset)
                if n != want { throw fail("entry \"\(entry.name)\" is truncated") }
                offset += UInt64(n)
                remaining -= UInt64(n)
                try decoder.push(UnsafeRawBufferPointer(rebasing: input[0..<n]), sink)
            }
            crc = try decoder.finish()
        } catch let f as InflateFailure {
            throw fail("entry \"\(entry.name)\" " + f.describe(size: entry.uncompressedSize))
        }
        if crc != entry.crc32 {
            throw AssetPatchError(.integrity, "\(source): entry \"\(entry.name)\" fails its CRC-32 check")
        }
    }
}

extension InflateFailure {
    /// The failure as the rest of a sentence that starts with the entry's name.
    func describe(size: UInt64) -> String {
        switch self {
        case let .corrupt(m): return "has corrupt deflate data (\(m))"
        case .overrun: return "inflates past its declared size of \(size) bytes"
        case .trailing: return "has data after the end of its deflate stream"
        case let .short(n): return n < size ? "has a truncated deflate stream (\(n) of \(size) bytes)" : "inflates to \(n) bytes, not its declared \(size)"
        }
    }
}

/// Buffers reused across entries, and a heap-allocated z_stream for the writer's deflate (zlib
/// keeps pointers into it).
package final class ZipBuffers {
    let input: UnsafeMutableRawBufferPointer
    let output: UnsafeMutableRawBufferPointer
    let stream: UnsafeMutablePointer<z_stream>

    package init(size: Int = 256 << 10) {
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
