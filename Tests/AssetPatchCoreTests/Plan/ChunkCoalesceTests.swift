import Testing
@testable import AssetPatchCore

/// How the chunks still to fetch become range requests.
@Suite struct ChunkCoalesceTests {
    func chunk(_ n: UInt8, at offset: UInt64, _ size: UInt32) -> (offset: UInt64, method: UInt16, record: ChunkRecord) {
        (offset, 8, ChunkRecord(sha256: [UInt8](repeating: n, count: 32), size: size, compressedSize: size))
    }

    @Test func smallGapsAreBridgedButNeverAcrossAVerifiedChunk() {
        // Three neighbouring 100 KB chunks, the middle one fetched and verified by an earlier
        // attempt: the two others are asked for on their own, not as one request whose gap is
        // the verified chunk's bytes. Without it, a small gap is bridged as before.
        let a = chunk(1, at: 0, 100_000), b = chunk(2, at: 100_000, 4_000), c = chunk(3, at: 104_000, 100_000)
        let bridged = ChunkPlanner.coalesce([a, c], gap: 32 << 10, maxRequest: 8 << 20)
        #expect(bridged.map { [$0.start, $0.end] } == [[0, 204_000]])
        let kept = ChunkPlanner.coalesce([a, c], gap: 32 << 10, maxRequest: 8 << 20, avoiding: [b.offset..<(b.offset + 4_000)])
        #expect(kept.map { [$0.start, $0.end] } == [[0, 100_000], [104_000, 204_000]])
        // A verified chunk elsewhere (before the first, after the last) changes nothing.
        let elsewhere = ChunkPlanner.coalesce([a, c], gap: 32 << 10, maxRequest: 8 << 20, avoiding: [300_000..<301_000])
        #expect(elsewhere.map { [$0.start, $0.end] } == [[0, 204_000]])
    }

    /// What an attempt still asks for: the ranges without the chunks there already, split where
    /// those lie (a verified chunk in the middle of a range is not fetched again as gap bytes).
    @Test func chunksThereAlreadyAreLeftOutAndTheirRangesSplit() {
        let a = chunk(1, at: 0, 100), b = chunk(2, at: 100, 50), c = chunk(3, at: 150, 100), d = chunk(4, at: 300, 10)
        let ranges = [ChunkRange(start: 0, end: 250, chunks: [a, b, c]), ChunkRange(start: 300, end: 310, chunks: [d])]
        let left = ChunkPlanner.leavingOut(ranges) { $0.offset == b.offset }
        #expect(left.map { [$0.start, $0.end] } == [[0, 100], [150, 250], [300, 310]])
        #expect(left.map { $0.chunks.map(\.offset) } == [[0], [150], [300]])
        #expect(ChunkPlanner.leavingOut(ranges) { _ in false } == ranges)
        #expect(ChunkPlanner.leavingOut(ranges) { _ in true }.isEmpty)
    }

    /// A chunked file is rebuilt from chunks only where one of its chunks need not be fetched
    /// for it: on disk, kept by an earlier attempt (by id, or a linked one by id and place), or
    /// in another place of the files planned. Any other is fetched whole.
    @Test func onlyFilesWithAChunkToSpareAreRebuilt() {
        var at: UInt64 = 0
        func file(_ name: String, _ seeds: [UInt8]) -> (file: ManifestFile, chunks: [ChunkRecord]) {
            let chunks = seeds.map { ChunkRecord(sha256: [UInt8](repeating: $0, count: 32), size: 1000, compressedSize: 500) }
            defer { at += 30 + UInt64(name.utf8.count) + 500 * UInt64(seeds.count) }
            return (ManifestFile(path: name, size: 1000 * UInt64(seeds.count), sha256: String(repeating: "ab", count: 32),
                                 location: ArchiveLocation(headerOffset: at, dataOffset: at + 30 + UInt64(name.utf8.count),
                                                           compressedSize: 500 * UInt64(seeds.count), method: 8)), chunks)
        }
        let files = [file("new", [1, 2, 3]), file("on-disk", [4, 5]), file("shared-a", [6, 7]), file("shared-b", [8, 7]),
                     file("kept", [9, 10]), file("kept-linked", [11, 12]), file("twice", [13, 13]), file("all-new-linked", [14, 15])]
        var local = LocalChunks()
        local.add("/r/files/old", [ChunkRecord(sha256: [UInt8](repeating: 5, count: 32), size: 1000, compressedSize: 500)])
        local.seal()
        let twelve = ChunkID([UInt8](repeating: 12, count: 32))
        let fetched = [ChunkID([UInt8](repeating: 10, count: 32)).hex: "/d/10",
                       ChunkPlanner.linkedKey(twelve, files[5].file.location!.dataOffset + 500): "/d/12"]
        let kept = ChunkPlanner.worthRebuilding(files, local: local, fetched: fetched, linked: ["kept-linked", "all-new-linked"])
        #expect(kept.map(\.file.path) == ["on-disk", "shared-a", "shared-b", "kept", "kept-linked", "twice"])
        // Nothing on disk, nothing kept, nothing shared: a fresh install rebuilds nothing.
        #expect(ChunkPlanner.worthRebuilding([files[0], files[7]], local: LocalChunks(), fetched: [:], linked: ["all-new-linked"]).isEmpty)
        // A linked chunk kept for another place does not count.
        let elsewhere = [ChunkPlanner.linkedKey(twelve, 7): "/d/12"]
        #expect(ChunkPlanner.worthRebuilding([files[5]], local: LocalChunks(), fetched: elsewhere, linked: ["kept-linked"]).isEmpty)
    }
}
