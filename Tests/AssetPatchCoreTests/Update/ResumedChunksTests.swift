import Testing

@testable import AssetPatchCore

/// Two chunked files (own chunks, not linked) sharing their first 40 records of 4 KiB of
/// noise, each with 8 of its own, published as version 1, and a client pointed at them with
/// nothing installed.
private struct SharingPair {
    let repo = TempDir(), data = TempDir()
    let a: [UInt8], b: [UInt8]
    let published: PublishResult
    let client: Client

    init(extra: [(String, [UInt8])] = []) throws {
        let shared = (0..<40).map { noise(4096, seed: UInt64(100 + $0)) }
        a = Array((shared + (0..<8).map { noise(4096, seed: UInt64(200 + $0)) }).joined())
        b = Array((shared + (0..<8).map { noise(4096, seed: UInt64(300 + $0)) }).joined())
        published = try publishChunked([("a.bin", a), ("b.bin", b)] + extra, version: 1, repo: repo, linkThreshold: 1 << 40)
        client = try Client(dataDir: data.path, bundleDir: nil)
        try client.set("manifest_url", headURL(repo))
    }

    /// Where the update keeps what it fetched.
    var fetchedDir: String { client.store.fetchedDir(published.manifest.archiveDigest) }

    func cleanup() {
        client.close()
        repo.cleanup()
        data.cleanup()
    }
}

/// What an attempt after an interruption fetches: nothing an earlier attempt fetched and kept,
/// whatever file it came with.
@Suite struct ResumedChunksTests {

    /// Two chunked files that share most of their chunks; a first attempt fetched the first
    /// whole and was killed before the second. The second's shared chunks are copied from the
    /// first's fetched file: only its own chunks are fetched, not the file whole.
    @Test func chunksAFetchedFileHoldsAreNotFetchedAgainForAnotherFile() throws {
        let t = try SharingPair(extra: [("readme.txt", Array("one".utf8))])
        defer { t.cleanup() }
        let (a, b, c) = (t.a, t.b, t.client)
        #expect(t.published.chunkedFiles == 2)
        let fresh = try #require(try c.preview())
        #expect(fresh.wholeArchiveReason == nil)
        // The shared chunks once, for a; a's and b's own: more than the 40 shared records.
        #expect(fresh.transferBytes > 40 * 4096)

        // What a kill leaves once a was fetched whole and renamed into place.
        let dir = t.fetchedDir
        try FS.makeDirectories(dir)
        try FS.writeAtomically(dir + "/" + Digest.sha256Hex(a), a)

        let resumed = try #require(try c.preview())
        #expect(resumed.wholeArchiveReason == nil)
        #expect(resumed.fetchedFiles.sorted() == ["b.bin", "readme.txt"])
        // b's 8 own records and at most two chunks on each side of where they start; not b whole.
        #expect(resumed.transferBytes <= 8 * 4096 + 4 * 8192, "\(resumed.transferBytes) bytes with a on disk")

        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("a.bin")) == a)
        #expect(try FS.readFile(try c.resolve("b.bin")) == b)
        #expect(try FS.list(c.store.downloadsDir).isEmpty)
    }

    /// A file fetched before, verified and lent to another file's rebuild, that changes on disk
    /// before the rebuild reads it: the rebuild fails its hash, and the whole archive that
    /// follows hashes the lent file again instead of taking it as verified.
    @Test func aLentFetchedFileThatChangedIsHashedAgainNotInstalled() throws {
        let t = try SharingPair()
        defer { t.cleanup() }
        let (a, b, c) = (t.a, t.b, t.client)
        let dir = t.fetchedDir
        let kept = dir + "/" + Digest.sha256Hex(a)
        try FS.makeDirectories(dir)
        try FS.writeAtomically(kept, a)
        // Once the plan is made (the download's first report), a's kept bytes change.
        var damaged = false
        let lines = logged(c)
        #expect(try c.update(progress: { p in
            if p.phase == .download && !damaged {
                damaged = true
                var other = a
                other[5 * 4096] ^= 0xFF
                try? FS.writeAtomically(kept, other)
            }
            return false
        }))
        #expect(damaged)
        #expect(lines().contains { $0.contains("downloading the whole archive instead") }, "\(lines())")
        #expect(try FS.readFile(try c.resolve("a.bin")) == a)
        #expect(try FS.readFile(try c.resolve("b.bin")) == b)
    }

    /// Chunks an interrupted attempt wrote in place are hashed when the plan is made and left
    /// out of it: what the plan says it transfers (the preview, the metered check, the route,
    /// the progress) is what the update then fetches.
    @Test func chunksWrittenInPlaceAreLeftOutOfThePlan() throws {
        let t = try SharingPair()
        defer { t.cleanup() }
        let (a, b, c) = (t.a, t.b, t.client)
        let fresh = try #require(try c.preview())
        #expect(fresh.wholeArchiveReason == nil)

        // What a kill leaves once a's first 24 records were written where they go.
        let dir = t.fetchedDir
        try FS.makeDirectories(dir)
        let file = try #require(t.published.manifest.files.first { $0.path == "a.bin" })
        try FS.writeAtomically(DirectChunks.partialPath(file, in: dir), Array(a[0..<(24 * 4096)]))
        let resumed = try #require(try c.preview())
        // The chunks wholly inside those records (all but about one at their end) are not
        // fetched again: more than 16 records' worth less (noise barely compresses).
        #expect(resumed.transferBytes + 16 * 4096 <= fresh.transferBytes, "\(resumed.transferBytes) of \(fresh.transferBytes)")

        var planned: UInt64 = 0
        #expect(try c.update(progress: { p in
            if p.phase == .download && planned == 0 { planned = p.bytesTotal }
            return false
        }))
        #expect(planned == resumed.transferBytes)
        #expect(try FS.readFile(try c.resolve("a.bin")) == a)
        #expect(try FS.readFile(try c.resolve("b.bin")) == b)
    }
}
