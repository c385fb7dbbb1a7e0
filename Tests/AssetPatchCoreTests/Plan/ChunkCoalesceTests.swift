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
}
