import Glibc
import Testing
@testable import AssetPatchCore

/// Content-defined chunks and the chunked zip entries that carry them.
@Suite struct ChunkTests {
    /// Word-like text and noise in records, as a game's pack file has.
    static func pack(_ size: Int, seed: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(size)
        var i: UInt64 = 0
        while out.count < size {
            i += 1
            let record = Int(4096 + (i * 7919) % 60000)
            out += i % 2 == 0 ? noise(record, seed: seed &+ i) : Array(Boundaries.content(.text, record).map { $0 ^ UInt8(truncatingIfNeeded: i) & 0 })
        }
        return Array(out.prefix(size))
    }

    func chunks(_ bytes: [UInt8], _ chunker: Chunker) throws -> [[UInt8]] {
        let dir = TempDir()
        defer { dir.cleanup() }
        try dir.write("f", bytes)
        var out: [[UInt8]] = []
        try chunker.chunks(of: try File.openRead(dir.path + "/f")) { out.append(Array($0)) }
        return out
    }

    @Test func boundariesFollowTheBytesNotTheirOffsets() throws {
        let chunker = try #require(Chunker(averageSize: 16 << 10))
        let original = ChunkTests.pack(3 << 20, seed: 1)
        let a = try chunks(original, chunker)
        #expect(a.reduce([], +) == original)
        #expect(a.dropLast().allSatisfy { $0.count >= chunker.minSize && $0.count <= chunker.maxSize })
        let mean = original.count / a.count
        #expect(mean > (8 << 10) && mean < (32 << 10), "mean chunk \(mean)")
        // Insert 5,000 bytes in the middle: every chunk but a few near the insertion survives.
        var edited = original
        edited.insert(contentsOf: noise(5000, seed: 99), at: 1_500_000)
        let b = try chunks(edited, chunker)
        #expect(b.reduce([], +) == edited)
        let before = Set(a.map { Digest.sha256Hex($0) })
        let changed = b.filter { !before.contains(Digest.sha256Hex($0)) }
        #expect(changed.count <= 3, "\(changed.count) chunks changed")
        #expect(Chunker(averageSize: 10_000) == nil)
    }

    /// The entry is one ordinary deflate stream (the zip reader inflates it whole), and each
    /// chunk's bytes inflate on their own to the chunk; stored when deflate saves nothing.
    @Test func chunkedEntriesInflateWholeAndChunkByChunk() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let chunker = try #require(Chunker(averageSize: 16 << 10))
        for (name, bytes) in [("text.bin", ChunkTests.pack(1 << 20, seed: 3)), ("noise.bin", noise(700_000, seed: 4)),
                              ("small.bin", Array("tiny".utf8)), ("empty.bin", [])] {
            try dir.write(name, bytes)
            let w = try ZipWriter(path: dir.path + "/a.zip")
            let (file, records) = try w.addChunked(name: name, sourcePath: dir.path + "/" + name, chunker: chunker)
            try w.finish()
            #expect(records.reduce(0) { $0 + Int($1.size) } == bytes.count)
            let zip = try ZipReader(path: dir.path + "/a.zip")
            var whole: [UInt8] = []
            try zip.extract(zip.entries[0], buffers: ZipBuffers()) { whole += $0 }
            #expect(whole == bytes, "\(name) inflated whole")
            let location = try #require(file.location)
            #expect(name != "noise.bin" || location.method == 0)
            let data = try zip.file.preadExactly(Int(location.compressedSize), at: location.dataOffset, what: "data")
            var at = 0, produced: [UInt8] = []
            for r in records {
                let piece = data[at..<(at + Int(r.compressedSize))]
                produced += try piece.withUnsafeBytes { try ChunkDecoder.decode($0, method: location.method, chunk: r) }
                at += Int(r.compressedSize)
            }
            #expect((records.isEmpty || at == data.count) && produced == bytes, "\(name) chunk by chunk")
            // A chunk's bytes with one byte flipped, or cut short, are refused.
            if let r = records.first, r.compressedSize > 2 {
                var bad = Array(data[0..<Int(r.compressedSize)])
                bad[bad.count / 2] ^= 0xFF
                #expect(throws: ChunkDecoder.Failure.self) { try bad.withUnsafeBytes { _ = try ChunkDecoder.decode($0, method: location.method, chunk: r) } }
                let short = Array(data[0..<(Int(r.compressedSize) / 2)])
                #expect(throws: ChunkDecoder.Failure.self) { try short.withUnsafeBytes { _ = try ChunkDecoder.decode($0, method: location.method, chunk: r) } }
            }
            try FS.unlink(dir.path + "/a.zip")
        }
    }

    /// Text's chunks of their own cost more than the file deflated as one stream (this text a
    /// sixth more, JSON about three times), noise with runs of zeros about the same: with a cost
    /// limit, the text's chunks share history and the other's stay on their own; noise is
    /// stored either way. Without a limit, every chunked file's chunks are its own.
    @Test func aFileWhoseOwnChunksCostMuchMoreGetsChunksThatShareHistory() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let chunker = try #require(Chunker(averageSize: 8 << 10))
        let text = Pack.text(3 << 20, seed: 5), pack = Pack.mostlyNoise(2 << 20, seed: 6), random = noise(1 << 20, seed: 7)
        for (name, bytes) in [("text", text), ("pack", pack), ("noise", random)] { try dir.write(name, bytes) }
        let oneStream = try RawDeflate.compress(text, level: 6).count
        func add(limit: Int?) throws -> [String: AddedFile] {
            let w = try ZipWriter(path: dir.path + "/a.zip")
            let added = try w.addFiles(["text", "pack", "noise"].map {
                EntrySource(name: $0, path: dir.path + "/" + $0, chunker: chunker, ownChunkCostLimit: limit)
            }, jobs: 2)
            try w.finish()
            // Whatever the chunks, the entry is one deflate stream of the file.
            let reader = try ZipReader(path: dir.path + "/a.zip")
            for (entry, bytes) in zip(reader.entries, [text, pack, random]) {
                var whole: [UInt8] = []
                try reader.extract(entry, buffers: ZipBuffers()) { whole += $0 }
                #expect(whole == bytes)
            }
            return Dictionary(uniqueKeysWithValues: added.map { ($0.file.path, $0) })
        }
        let limited = try add(limit: 5)
        let t = try #require(limited["text"]), p = try #require(limited["pack"]), n = try #require(limited["noise"])
        #expect(t.linked && !t.chunks.isEmpty)
        #expect(Double(t.file.location!.compressedSize) <= Double(oneStream) * 1.05, "\(t.file.location!.compressedSize) \(oneStream)")
        #expect(!p.linked && p.file.location?.method == 8 && !p.chunks.isEmpty)
        #expect(!n.linked && n.file.location?.method == 0)
        let unlimited = try add(limit: nil)
        #expect(unlimited.values.allSatisfy { !$0.linked })
        let own = try #require(unlimited["text"]?.file.location?.compressedSize)
        #expect(Double(own) > Double(oneStream) * 1.1, "\(own) \(oneStream)")
        // The pack's own chunks are the same bytes whatever the limit: it was not re-cut.
        #expect(unlimited["pack"]?.chunks == p.chunks && unlimited["pack"]?.file.sha256 == p.file.sha256)
        #expect(unlimited["pack"]?.file.location?.compressedSize == p.file.location?.compressedSize)
        // A limit above what text's own chunks cost keeps them.
        #expect(try add(limit: 1000)["text"]?.linked == false)
    }
}

/// The release index's pages: what goes in comes out, every damaged page is refused with a
/// status (never a crash), and a file that changes size changes only its own page.
@Suite struct IndexPageTests {
    func file(_ path: String, at header: UInt64, size: UInt64 = 100, compressed: UInt64 = 60) -> ManifestFile {
        ManifestFile(path: path, size: size, sha256: String(repeating: "7", count: 64),
                     location: ArchiveLocation(headerOffset: header, dataOffset: header + 30 + UInt64(path.utf8.count),
                                               compressedSize: compressed, method: 8))
    }

    @Test func pagesRoundTripAndFileTablesCountFromTheirBase() throws {
        let ref = PageRef(sha256: [UInt8](repeating: 3, count: 32), compressedSize: 77)
        let files = [IndexedFile(file: file("a/b.txt", at: 5000)), IndexedFile(file: file("c", at: 5200), chunkPages: [ref])]
        let table = IndexPage.files(files)
        #expect(IndexPage.base(of: files) == 5000)
        #expect(try IndexPage.decode(table.encode(), source: "t", base: 5000) == table)
        // The same files 1 MiB further into the archive encode to the same bytes.
        let moved = files.map { f -> IndexedFile in
            var f = f
            f.file.location!.headerOffset += 1 << 20
            f.file.location!.dataOffset += 1 << 20
            return f
        }
        #expect(IndexPage.files(moved).encode() == table.encode())
        #expect(try IndexPage.decode(table.encode(), source: "t", base: 5000 + (1 << 20)) == .files(moved))
        let root = IndexPage.root([FileTableRef(page: ref, base: 5000)])
        #expect(try IndexPage.decode(root.encode(), source: "t") == root)
        let chunks = IndexPage.chunks([ChunkRecord(sha256: [UInt8](repeating: 9, count: 32), size: 4096, compressedSize: 1200)])
        #expect(try IndexPage.decode(chunks.encode(), source: "t") == chunks)
        let (sealedRef, stored) = try table.sealed()
        #expect(try IndexPage.unseal(stored, sealedRef, source: "t") == table.encode())
    }

    /// Read for its chunked files only, a file table gives exactly those of the full decode,
    /// and refuses what the full decode refuses for its numbers and order.
    @Test func aFileTableReadForItsChunkedFilesGivesThoseOfTheFullDecode() throws {
        let ref = PageRef(sha256: [UInt8](repeating: 5, count: 32), compressedSize: 40)
        var files: [IndexedFile] = []
        for i in 0..<30 {
            let pages: [PageRef] = i % 7 == 3 ? [ref, ref] : []
            let name = i < 10 ? "dir/f0\(i).bin" : "dir/f\(i).bin"
            files.append(IndexedFile(file: file(name, at: UInt64(i) * 400 + 100), chunkPages: pages))
        }
        let bytes = IndexPage.files(files).encode()
        guard case let .files(all) = try IndexPage.decode(bytes, source: "t", base: 9),
              case let .files(chunked) = try IndexPage.decode(bytes, source: "t", base: 9, onlyChunked: true) else {
            Issue.record("not a file table"); return
        }
        #expect(all.count == 30 && chunked == all.filter { !$0.chunkPages.isEmpty } && chunked.count == 4)
        for n in 0..<bytes.count {
            #expect(statusOf { _ = try IndexPage.decode(Array(bytes[0..<n]), source: "t", onlyChunked: true) } == .manifest, "truncated at \(n)")
        }
        // Two files swapped (paths out of order), neither chunked: refused either way.
        var swapped = files
        swapped.swapAt(0, 1)
        let out = IndexPage.files(swapped).encode()
        #expect(statusOf { _ = try IndexPage.decode(out, source: "t", onlyChunked: true) } == .manifest)
        #expect(statusOf { _ = try IndexPage.decode(out, source: "t") } == .manifest)
    }

    @Test func everyTruncationAndByteFlipIsRefusedOrDecodesToAValidPage() throws {
        let files = (0..<20).map { IndexedFile(file: file("dir/file\($0).bin", at: UInt64($0) * 500 + 100)) }
        for page in [IndexPage.files(files), .root([FileTableRef(page: PageRef(sha256: [UInt8](repeating: 1, count: 32), compressedSize: 9), base: 1)]),
                     .chunks([ChunkRecord(sha256: [UInt8](repeating: 2, count: 32), size: 10, compressedSize: 12)])] {
            let bytes = page.encode()
            // The count a reader sizes its list by, without decoding, is a file table's.
            if case let .files(l) = page { #expect(IndexPage.fileCount(bytes) == l.count) } else { #expect(IndexPage.fileCount(bytes) == nil) }
            #expect(IndexPage.fileCount(Array(bytes[0..<4])) == nil && IndexPage.fileCount([0] + bytes.dropFirst()) == nil)
            for n in 0..<bytes.count {
                #expect(statusOf { _ = try IndexPage.decode(Array(bytes[0..<n]), source: "t") } == .manifest, "truncated at \(n)")
                // Never more than the bytes could hold.
                #expect((IndexPage.fileCount(Array(bytes[0..<n])) ?? 0) <= max(0, n - 6) / 40, "truncated at \(n)")
            }
            for i in 0..<bytes.count {
                var damaged = bytes
                damaged[i] ^= 0x80
                // Either refused as a manifest error or a page that encodes back to itself.
                do {
                    let decoded = try IndexPage.decode(damaged, source: "t")
                    _ = decoded.encode()
                } catch let e as AssetPatchError {
                    #expect(e.status == .manifest)
                }
            }
        }
        // A page claiming far more files than its bytes hold (8 MiB of zeros saying 8 million):
        // sized by what the bytes could hold, and refused as a manifest error.
        var claim: [UInt8] = [0x41, 0x50, 0x58, 0x31, 2]
        claim.putVarint(8_000_000)
        claim += [UInt8](repeating: 0, count: 8 << 20)
        #expect(IndexPage.fileCount(claim) == (claim.count - 6) / 40)
        #expect(statusOf { _ = try IndexPage.decode(claim, source: "t") } == .manifest)
        // A sealed page that is a byte short, or whose sha256 differs, is an integrity error.
        let (ref, stored) = try IndexPage.files(files).sealed()
        #expect(statusOf { _ = try IndexPage.unseal(Array(stored.dropLast()), ref, source: "t") } == .integrity)
        var other = ref
        other.sha256[0] ^= 1
        #expect(statusOf { _ = try IndexPage.unseal(stored, other, source: "t") } == .integrity)
    }
}
