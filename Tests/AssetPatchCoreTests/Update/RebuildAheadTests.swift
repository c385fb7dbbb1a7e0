import Glibc
import Testing
@testable import AssetPatchCore

/// Chunked files are rebuilt as their chunks arrive, beside the chunk fetch: a file whose chunks
/// are all there is rebuilt while a later file's chunk is still on its way.
@Suite struct RebuildAheadTests {
    /// Two files of chunks fetched now (`.archive`): `a`'s chunks arrive, and `b`'s only once
    /// `a` is rebuilt (waited for at most a minute: a rebuild that waited for the whole fetch
    /// never lets `b`'s chunk arrive in time, and the test fails).
    @Test func aFileIsRebuiltWhileALaterFilesChunkIsStillToArrive() throws {
        let data = TempDir(), chunkDir = TempDir(), rebuilt = TempDir()
        defer { data.cleanup(); chunkDir.cleanup(); rebuilt.cleanup() }
        let parts = [noise(4096, seed: 3), noise(5000, seed: 5), noise(3000, seed: 7)]
        let records = try parts.map { ChunkRecord(sha256: try Digest.sha256($0), size: UInt32($0.count), compressedSize: UInt32($0.count)) }
        func file(_ path: String, _ numbers: [Int]) throws -> ChunkedFile {
            let bytes = numbers.flatMap { parts[$0] }
            let f = ManifestFile(path: path, size: UInt64(bytes.count), sha256: Hex.encode(try Digest.sha256(bytes)))
            return ChunkedFile(file: f, method: 0, records: numbers.map { records[$0] },
                               sources: numbers.map { .archive(offset: UInt64($0) * 10_000) }, localFiles: [])
        }
        let files = [try file("a.bin", [0, 1]), try file("b.bin", [1, 2])]
        let arriving = Arrivals<String, String>()
        func arrive(_ n: Int) throws {
            try chunkDir.write(records[n].id.hex, parts[n])
            arriving.put(records[n].id.hex, chunkDir.path + "/" + records[n].id.hex)
        }
        let installer = Installer(store: try Store(root: data.path), maxReleaseBytes: 1 << 30, cancel: CancelToken(),
                                  progress: ProgressReporter(nil, cancel: CancelToken()))
        let stop = CancelToken()
        var aWasThereFirst = false
        try alongside({ try installer.rebuildAhead(files, arriving: arriving, into: rebuilt.path) }, stopping: stop) {
            try arrive(0)
            try arrive(1)
            let a = rebuilt.path + "/" + files[0].file.sha256
            let deadline = monotonicMillis() + 60_000
            while !FS.exists(a) && monotonicMillis() < deadline { usleep(1000) }
            aWasThereFirst = FS.exists(a)
            try arrive(2)
            arriving.close()
        }
        #expect(aWasThereFirst, "a was rebuilt before b's last chunk arrived")
        #expect(try FS.readFile(rebuilt.path + "/" + files[0].file.sha256) == parts[0] + parts[1])
        #expect(try FS.readFile(rebuilt.path + "/" + files[1].file.sha256) == parts[1] + parts[2])
        #expect(try FS.list(chunkDir.path).isEmpty, "every chunk dropped after its last taker")
    }

    /// A chunk that never arrives: once the fetch is done (closed), the rebuild fails on it
    /// instead of waiting, and the files before it stay rebuilt.
    @Test func aChunkThatNeverArrivesFailsTheRebuildOnceTheFetchIsDone() throws {
        let data = TempDir(), chunkDir = TempDir(), rebuilt = TempDir()
        defer { data.cleanup(); chunkDir.cleanup(); rebuilt.cleanup() }
        let parts = [noise(4096, seed: 13), noise(4096, seed: 17)]
        let records = try parts.map { ChunkRecord(sha256: try Digest.sha256($0), size: 4096, compressedSize: 4096) }
        let files = try parts.indices.map { n in
            ChunkedFile(file: ManifestFile(path: "f\(n).bin", size: 4096, sha256: Hex.encode(try Digest.sha256(parts[n]))), method: 0,
                        records: [records[n]], sources: [.archive(offset: UInt64(n) * 4096)], localFiles: [])
        }
        try chunkDir.write(records[0].id.hex, parts[0])
        let arriving = Arrivals([records[0].id.hex: chunkDir.path + "/" + records[0].id.hex])
        arriving.close()
        let installer = Installer(store: try Store(root: data.path), maxReleaseBytes: 1 << 30, cancel: CancelToken(),
                                  progress: ProgressReporter(nil, cancel: CancelToken()))
        #expect(throws: AssetPatchError.self) { try installer.rebuildAhead(files, arriving: arriving, into: rebuilt.path) }
        #expect(try FS.list(rebuilt.path) == [files[0].file.sha256])
    }
}
