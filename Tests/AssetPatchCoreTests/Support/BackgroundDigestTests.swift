import Testing
@testable import AssetPatchCore

/// The digest a rebuild takes on another thread: the same as hashing the pieces in order,
/// whatever their sizes, however many wait in the pool.
@Suite struct BackgroundDigestTests {
    @Test(arguments: [2, 3, 8])
    func hashesThePiecesInTheOrderSubmitted(buffers: Int) throws {
        let whole = noise(3_000_000, seed: 5)
        let d = try BackgroundDigest(buffers: buffers, size: 1 << 16)
        var at = 0, step = 1
        while at < whole.count {
            let n = min(step, whole.count - at, d.bufferSize)
            let b = d.buffer()
            whole.withUnsafeBytes { b.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[at..<(at + n)])) }
            d.submit(b, count: n)
            at += n
            step = step * 3 % 70_001 + 1  // sizes from one byte to the whole buffer
        }
        #expect(d.finish() == Digest.sha256(whole))
    }

    @Test func stoppingEarlyLeavesNothingRunning() throws {
        let d = try BackgroundDigest(buffers: 2, size: 1024)
        let b = d.buffer()
        b.initializeMemory(as: UInt8.self, repeating: 7)
        d.submit(b, count: 1024)
        d.stop()
        d.stop()
        #expect(d.finish() == Digest.sha256([UInt8](repeating: 7, count: 1024)))
    }
}
