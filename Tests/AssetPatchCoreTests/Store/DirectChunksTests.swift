import Glibc
import Testing
@testable import AssetPatchCore

/// Chunks fetched now are written straight into the files being rebuilt: the rebuild reads
/// them back only for the whole file's hash, a later place of the same chunk copies it from its
/// first place, and an interrupted attempt's bytes count only where they hash to their chunk.
@Suite struct DirectChunksTests {
    let parts = [noise(4096, seed: 71), noise(6000, seed: 73), noise(3000, seed: 79)]
    var records: [ChunkRecord] {
        parts.map { ChunkRecord(sha256: try! Digest.sha256($0), size: UInt32($0.count), compressedSize: UInt32($0.count)) }
    }

    /// a = X Y (fetched at 100 and 200), b = Y (taken again) Z (fetched at 300).
    func files() throws -> [ChunkedFile] {
        func file(_ path: String, _ numbers: [Int], _ sources: [ChunkOrigin]) throws -> ChunkedFile {
            let bytes = numbers.flatMap { parts[$0] }
            return ChunkedFile(file: ManifestFile(path: path, size: UInt64(bytes.count), sha256: Hex.encode(try Digest.sha256(bytes))),
                               method: 0, records: numbers.map { records[$0] }, sources: sources, localFiles: [])
        }
        return [try file("a.bin", [0, 1], [.archive(offset: 100), .archive(offset: 200)]),
                try file("b.bin", [1, 2], [.fetched, .archive(offset: 300)])]
    }

    @Test func eachFetchedChunkHasOnePlaceWhereLaterPlacesFindIt() throws {
        let files = try files()
        let direct = DirectChunks(files, dir: "/d")
        let a = try #require(direct.place(100)), y = try #require(direct.place(200)), z = try #require(direct.place(300))
        #expect(a.path == "/d/." + files[0].file.sha256 + ".rebuild" && a.rebuilt == "/d/" + files[0].file.sha256 && a.offset == 0)
        #expect(y.path == a.path && y.offset == 4096)
        #expect(z.path == "/d/." + files[1].file.sha256 + ".rebuild" && z.offset == 6000)
        #expect(direct.place(0) == nil)
        let taken = try #require(direct.firstPlace(of: records[1].id))
        #expect(taken.archiveOffset == 200 && taken.place.path == a.path && taken.place.offset == 4096, "b takes Y from a")
        #expect(direct.firstPlace(of: records[0].id)?.archiveOffset == 100)
    }

    /// Both files rebuilt from chunks written in place, b's Y copied from a: each is whole,
    /// read-only, cut to its size though the file held more before, and no partial is left.
    @Test func filesAreRebuiltFromChunksWrittenInPlace() throws {
        let data = TempDir(), chunkDir = TempDir(), rebuilt = TempDir()
        defer { data.cleanup(); chunkDir.cleanup(); rebuilt.cleanup() }
        let files = try files()
        let direct = DirectChunks(files, dir: rebuilt.path)
        // An interrupted attempt's longer file where b is rebuilt.
        try rebuilt.write("." + files[1].file.sha256 + ".rebuild", noise(20_000, seed: 5))
        let arriving = Arrivals<String, String>()
        var open: File?
        for (offset, n) in [(UInt64(100), 0), (200, 1), (300, 2)] {
            let place = try #require(direct.place(offset))
            try DirectChunks.write(parts[n], at: place, open: &open)
            arriving.put(DirectChunks.key(offset), place.path)
        }
        open = nil
        arriving.close()
        let installer = Installer(store: try Store(root: data.path), maxReleaseBytes: 1 << 30, cancel: CancelToken(),
                                  progress: ProgressReporter(nil, cancel: CancelToken()))
        try installer.rebuildAhead(files, arriving: arriving, into: rebuilt.path, direct: direct)
        #expect(try FS.readFile(rebuilt.path + "/" + files[0].file.sha256) == parts[0] + parts[1])
        #expect(try FS.readFile(rebuilt.path + "/" + files[1].file.sha256) == parts[1] + parts[2])
        var st = stat()
        #expect(lstat(rebuilt.path + "/" + files[1].file.sha256, &st) == 0 && st.st_mode & 0o777 == 0o444)
        #expect(Set(try FS.list(rebuilt.path)) == Set(files.map(\.file.sha256)), "no file being rebuilt is left")
        #expect(try FS.list(chunkDir.path).isEmpty, "no chunk file made")
    }

    /// A file being rebuilt that an interrupted attempt left read-only (killed between its
    /// chmod and its rename) is made writable again: a process not running as root could not
    /// write its chunks there otherwise.
    @Test func aFileLeftReadOnlyIsWrittenAgain() throws {
        let rebuilt = TempDir()
        defer { rebuilt.cleanup() }
        let files = try files()
        let direct = DirectChunks(files, dir: rebuilt.path)
        let place = try #require(direct.place(300))
        _ = try File.open(place.path, O_WRONLY | O_CREAT | O_EXCL, mode: 0o444)
        var open: File?
        try DirectChunks.write(parts[2], at: place, open: &open)
        open = nil
        var st = stat()
        #expect(lstat(place.path, &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(Array(try FS.readFile(place.path).suffix(parts[2].count)) == parts[2])
    }

    /// An interrupted attempt wrote X in place, other bytes where Y goes (a power cut's), and
    /// half of Z: only X counts as there.
    @Test func anInterruptedAttemptsChunksCountWhereTheyHashToTheirChunk() throws {
        let rebuilt = TempDir()
        defer { rebuilt.cleanup() }
        let files = try files()
        let direct = DirectChunks(files, dir: rebuilt.path)
        var open: File?
        try DirectChunks.write(parts[0] + noise(parts[1].count, seed: 99), at: try #require(direct.place(100)), open: &open)
        try DirectChunks.write(Array(parts[2].prefix(1000)), at: try #require(direct.place(300)), open: &open)
        open = nil
        #expect(direct.present() == [DirectChunks.key(100): DirectChunks.partialPath(files[0].file, in: rebuilt.path)])
    }
}
