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
}
