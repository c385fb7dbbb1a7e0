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
}
