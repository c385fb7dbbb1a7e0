import Glibc
import Testing
@testable import AssetPatchCore

/// Archives compressed on several threads: the same bytes whatever the number, entries larger
/// than a thread's memory share streamed in order, failures stopping every thread, and files
/// that are already compressed stored without deflating them whole.
@Suite struct ParallelArchiveTests {
    /// Word-like text (compresses to about half), deterministic.
    static func text(_ count: Int, seed: UInt64 = 7) -> [UInt8] {
        let letters = Array("etaoinshrdlucmfwypvbgkqjxz".utf8)
        return noise(count, seed: seed).enumerated().map { i, b in
            i % 23 == 0 ? 10 : b % 7 == 0 ? 32 : letters[Int(b) % letters.count]
        }
    }

    /// A tree that takes every route: small entries parked in memory, a deflated entry and a
    /// stored one each larger than a thread's share (`EntryOrder.bytesPerJob`), chunked entries
    /// deflated and stored, a file sampled as compressible though half of it is noise, an empty
    /// file.
    static func tree(_ dir: TempDir) throws -> [(String, [UInt8], chunked: Bool)] {
        var files: [(String, [UInt8], chunked: Bool)] = []
        for i in 0..<24 { files.append(("small/\(i).txt", text(500 + i * 997, seed: UInt64(i + 1)), false)) }
        files.append(("big/text.txt", text(EntryOrder.bytesPerJob * 2 + 12_345, seed: 99), false))
        files.append(("big/noise.bin", noise(EntryOrder.bytesPerJob + 4096, seed: 5), false))
        files.append(("chunked/noise.pack", noise(3 << 20, seed: 11), true))
        files.append(("chunked/text.pack", text(3 << 20, seed: 12), true))
        files.append(("mixed.bin", noise(512 << 10, seed: 3) + text(512 << 10, seed: 4), false))
        files.append(("stored.bin", noise(600 << 10, seed: 8), false))
        files.append(("empty", [], false))
        for (n, b, _) in files { try dir.write("src/" + n, b) }
        return files
    }

    @Test func theArchiveIsTheSameWhateverTheNumberOfThreads() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let files = try ParallelArchiveTests.tree(dir)
        let chunker = Chunker(averageSize: 8192)!
        let sources = files.map { EntrySource(name: $0.0, path: dir.path + "/src/" + $0.0, chunker: $0.chunked ? chunker : nil) }
        var first: (digest: String, added: [AddedFile])?
        for jobs in [1, 2, 3, 8] {
            let path = dir.path + "/\(jobs).zip"
            let w = try ZipWriter(path: path)
            let added = try w.addFiles(sources, jobs: jobs)
            try w.finish()
            let digest = try Digest.hexOfFile(path)
            if let first {
                #expect(digest == first.digest, "\(jobs) threads wrote another archive")
                #expect(added.map(\.file) == first.added.map(\.file) && added.map(\.chunks) == first.added.map(\.chunks))
            } else {
                first = (digest, added)
            }
            // Every entry reads back as its file, where the returned locations say.
            let z = try ZipReader(path: path)
            #expect(z.entries.map(\.name) == files.map(\.0))
            let buffers = ZipBuffers(size: 64 << 10)
            for (e, (name, bytes, _)) in zip(z.entries, files) {
                var data: [UInt8] = []
                try z.extract(e, buffers: buffers) { data += $0 }
                #expect(data == bytes, "\(name) with \(jobs) threads")
                let f = added.first { $0.file.path == name }!.file
                #expect(f.sha256 == Digest.sha256Hex(bytes) && f.size == UInt64(bytes.count))
                #expect(f.location?.headerOffset == e.localHeaderOffset && f.location?.dataOffset == e.dataOffset && f.location?.method == e.method)
            }
        }
        // The routes taken: deflate where it pays, stored where it does not.
        let methods = Dictionary(uniqueKeysWithValues: first!.added.map { ($0.file.path, $0.file.location!.method) })
        #expect(methods["big/text.txt"] == 8 && methods["chunked/text.pack"] == 8 && methods["mixed.bin"] == 8)
        #expect(methods["big/noise.bin"] == 0 && methods["chunked/noise.pack"] == 0 && methods["stored.bin"] == 0)
        // A stored chunked entry's chunks are plain ranges of it; every chunk decodes on its own.
        let path = dir.path + "/1.zip"
        let archive = try File.openRead(path)
        for added in first!.added where !added.chunks.isEmpty {
            var at = added.file.location!.dataOffset
            var whole: [UInt8] = []
            for c in added.chunks {
                let compressed = try archive.preadExactly(Int(c.compressedSize), at: at, what: "a chunk")
                whole += try compressed.withUnsafeBytes { try ChunkDecoder.decode($0, method: added.file.location!.method, chunk: c) }
                at += UInt64(c.compressedSize)
            }
            #expect(Digest.sha256Hex(whole) == added.file.sha256)
        }
    }

    @Test func aFileThatCannotBeReadStopsEveryThread() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        var sources: [EntrySource] = []
        for i in 0..<12 {
            try dir.write("src/\(i)", ParallelArchiveTests.text(200_000, seed: UInt64(i)))
            sources.append(EntrySource(name: "\(i)", path: dir.path + "/src/\(i)"))
        }
        sources[7].path = dir.path + "/src/missing"
        for jobs in [1, 3] {
            let w = try ZipWriter(path: dir.path + "/out.zip")
            do {
                _ = try w.addFiles(sources, jobs: jobs)
                Issue.record("an unreadable file was archived")
            } catch let e as AssetPatchError {
                #expect(e.status == .io && e.message.contains("missing"))
            }
        }
    }

    @Test func alreadyCompressedFilesAreSampledNotDeflatedWhole() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let compressor = EntryCompressor(level: 6)
        func sampled(_ bytes: [UInt8]) throws -> Bool {
            try dir.write("f", bytes)
            return try compressor.looksIncompressible(try File.openRead(dir.path + "/f"), size: UInt64(bytes.count))
        }
        #expect(try sampled(noise(4 << 20)))
        #expect(try !sampled(ParallelArchiveTests.text(4 << 20)))
        // Below the threshold nothing is sampled: deflate decides.
        #expect(try !sampled(noise(Int(EntryCompressor.sampleThreshold) - 1)))
        // Noise with text where one window falls: deflated.
        var mostlyNoise = noise(4 << 20)
        mostlyNoise.replaceSubrange((2 << 20)..<((2 << 20) + (256 << 10)), with: ParallelArchiveTests.text(256 << 10))
        #expect(try !sampled(mostlyNoise))
        // A block of noise repeated within deflate's history compresses: not incompressible.
        let block = noise(12 << 10)
        #expect(try !sampled(Array((0..<100).map { _ in block }.joined())))
    }
}
