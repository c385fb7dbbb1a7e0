import Glibc
import Testing
@testable import AssetPatchCore

/// A chunked file rebuilt from fetched chunks is kept among the update's fetched files, and the
/// chunks no later file takes are dropped: the chunks and the files made of them are never on
/// disk together, and an attempt after an interruption finds the file, not its chunks.
@Suite struct RebuiltFileTests {
    @Test func aRebuiltFileReplacesTheChunksOnlyItTookAndOutlivesAFailureAfterIt() throws {
        let data = TempDir(), chunkDir = TempDir(), rebuilt = TempDir()
        defer { data.cleanup(); chunkDir.cleanup(); rebuilt.cleanup() }
        // a = one + shared, b = shared + two: the shared chunk's last taker is b.
        let one = noise(4096, seed: 11), shared = noise(4096, seed: 21), two = noise(4096, seed: 31)
        var chunks: [String: String] = [:]
        func record(_ bytes: [UInt8]) throws -> ChunkRecord {
            let r = ChunkRecord(sha256: try Digest.sha256(bytes), size: UInt32(bytes.count), compressedSize: UInt32(bytes.count))
            try chunkDir.write(r.id.hex, bytes)
            chunks[r.id.hex] = chunkDir.path + "/" + r.id.hex
            return r
        }
        let records = [try record(one), try record(shared), try record(two)]
        func file(_ path: String, _ parts: [[UInt8]], _ rs: [ChunkRecord]) throws -> ChunkedFile {
            let bytes = parts.flatMap { $0 }
            let f = ManifestFile(path: path, size: UInt64(bytes.count), sha256: Hex.encode(try Digest.sha256(bytes)))
            return ChunkedFile(file: f, method: 0, records: rs, sources: rs.map { _ in .fetched }, localFiles: [])
        }
        let files = [try file("a.bin", [one, shared], [records[0], records[1]]),
                     try file("b.bin", [shared, two], [records[1], records[2]])]
        let lastUses = Installer.lastUses(files)
        #expect(lastUses == [records[0].id.hex: 0, records[1].id.hex: 1, records[2].id.hex: 1])

        let installer = Installer(store: try Store(root: data.path), maxReleaseBytes: 1 << 30, cancel: CancelToken(),
                                  progress: ProgressReporter(nil, cancel: CancelToken()))
        let a = try installer.rebuild(files, 0, into: rebuilt.path, chunks: &chunks, lastUses: lastUses) { _ in }
        #expect(a == rebuilt.path + "/" + files[0].file.sha256, "kept under its sha256, where fetched files are found")
        #expect(try FS.readFile(a) == one + shared)
        #expect(Set(try FS.list(chunkDir.path)) == [records[1].id.hex, records[2].id.hex], "only the chunk a alone took is dropped")
        #expect(chunks[records[0].id.hex] == nil && chunks[records[1].id.hex] != nil)

        // b's last chunk is gone: its rebuild fails, and leaves neither a part nor a's file behind.
        try FS.unlink(chunkDir.path + "/" + records[2].id.hex)
        #expect(throws: (any Error).self) {
            _ = try installer.rebuild(files, 1, into: rebuilt.path, chunks: &chunks, lastUses: lastUses) { _ in }
        }
        #expect(try FS.list(rebuilt.path) == [files[0].file.sha256])
        #expect(try FS.list(chunkDir.path) == [records[1].id.hex], "a failed rebuild drops no chunk it took")
        // Asked again for a (the same content at another path), the kept file is the answer.
        #expect(try installer.rebuild(files, 0, into: rebuilt.path, chunks: &chunks, lastUses: lastUses) { _ in } == a)
    }

    /// The same content at two paths: the second place answers with the file the first
    /// rebuilt, and the chunks whose last taker it is are dropped there too.
    @Test func aSecondPlaceOfTheSameContentDropsTheChunksItTook() throws {
        let data = TempDir(), chunkDir = TempDir(), rebuilt = TempDir()
        defer { data.cleanup(); chunkDir.cleanup(); rebuilt.cleanup() }
        let parts = [noise(4096, seed: 51), noise(4096, seed: 61)]
        var chunks: [String: String] = [:]
        var records: [ChunkRecord] = []
        for bytes in parts {
            let r = ChunkRecord(sha256: try Digest.sha256(bytes), size: 4096, compressedSize: 4096)
            try chunkDir.write(r.id.hex, bytes)
            chunks[r.id.hex] = chunkDir.path + "/" + r.id.hex
            records.append(r)
        }
        let bytes = parts.flatMap { $0 }
        let sha = Hex.encode(try Digest.sha256(bytes))
        let files = ["a.bin", "copy/a.bin"].map {
            ChunkedFile(file: ManifestFile(path: $0, size: UInt64(bytes.count), sha256: sha), method: 0, records: records,
                        sources: [.fetched, .fetched], localFiles: [])
        }
        let lastUses = Installer.lastUses(files)
        let installer = Installer(store: try Store(root: data.path), maxReleaseBytes: 1 << 30, cancel: CancelToken(),
                                  progress: ProgressReporter(nil, cancel: CancelToken()))
        let first = try installer.rebuild(files, 0, into: rebuilt.path, chunks: &chunks, lastUses: lastUses) { _ in }
        #expect(try FS.list(chunkDir.path).count == 2, "the copy still takes them")
        #expect(try installer.rebuild(files, 1, into: rebuilt.path, chunks: &chunks, lastUses: lastUses) { _ in } == first)
        #expect(try FS.list(chunkDir.path).isEmpty, "dropped once their last taker is placed")
        #expect(chunks.isEmpty)
    }

    /// With chunks on disk, a chunked file rewritten through and through is fetched whole (one
    /// entry, nothing rebuilt), while one changed in part is rebuilt from its chunks.
    @Test func anUpdateFetchesWholeAChunkedFileThatSharesNothing() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        var pack = Pack(count: 60, seed: 5)
        let old = noise(200 << 10, seed: 41), rewritten = noise(200 << 10, seed: 43)
        try publishChunked([("data/pack.bin", pack.bytes), ("data/other.bin", old)], version: 1, repo: repo)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", URLs.fileURL(forPath: repo.path + "/head.json"))
        #expect(try c.update(progress: nil))
        pack.records[30] = noise(pack.records[30].count, seed: 77)
        try publishChunked([("data/pack.bin", pack.bytes), ("data/other.bin", rewritten)], version: 2, repo: repo)
        let lines = Locked<[String]>([])
        c.setLogger { _, line in lines.withLock { $0.append(line) } }
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("data/pack.bin")) == pack.bytes)
        #expect(try FS.readFile(try c.resolve("data/other.bin")) == rewritten)
        // other.bin as one entry (it is 50 chunks of 4 KiB), pack.bin as the few chunks around its edit.
        let planned = try #require(lines.withLock { $0 }.first { $0.hasPrefix("differential update: ") })
        let entries = try #require(Int(planned.dropFirst("differential update: ".count).prefix { $0 != " " }))
        #expect(entries >= 2 && entries <= 1 + 6, "\(planned)")
    }
}
