import Glibc
import Testing
@testable import AssetPatchCore

/// Updates by delta through the client (file://): the delta file replaces the changed files'
/// chunks, a base that changed on disk costs that file from the archive, never a wrong file,
/// and the publisher keeps only deltas that pay.
@Suite struct DeltaUpdateTests {

    @Test func aChangedFileComesFromItsDeltaAndAChangedBaseFromTheArchive() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        var pack = Pack(count: 60, seed: 4)
        let doc = Pack.text(200_000, seed: 9)
        try publishChunked([("pack.bin", pack.bytes), ("doc.json", doc)], version: 1, repo: repo, deltas: 1)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        #expect(try c.update(progress: nil))
        // The installed pack changes on disk (read-only, but not to its owner).
        let installed = try c.resolve("pack.bin")
        chmod(installed, 0o644)
        try File.open(installed, O_WRONLY).pwrite([0xff, 0xfe, 0xfd], at: 5000)
        pack.records[50] = noise(pack.records[50].count, seed: 8)
        var doc2 = doc
        doc2.replaceSubrange(100_000..<100_010, with: Array("0123456789".utf8))
        let published = try publishChunked([("pack.bin", pack.bytes), ("doc.json", doc2)], version: 2, repo: repo, deltas: 1)
        #expect(published.deltas.count == 1 && published.deltas[0].built.deltas == 2, "both files have a delta worth keeping")
        let lines = logged(c)
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("pack.bin")) == pack.bytes)
        #expect(try FS.readFile(try c.resolve("doc.json")) == doc2)
        #expect(lines().contains { $0.contains("2 files from deltas") }, "\(lines())")
        #expect(lines().contains { $0.contains("the delta of \"pack.bin\" makes sha256") && $0.contains("from the archive") }, "\(lines())")
        #expect(!lines().contains { $0.contains("the delta of \"doc.json\"") }, "\(lines())")
    }

    /// A file a delta made has no chunk list on disk (its pages were not fetched): a later
    /// update by chunks cuts the file on disk instead, and still fetches only what changed.
    @Test func aFileMadeByDeltaStillLendsItsChunksToALaterUpdate() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        var pack = Pack(count: 200, seed: 5)
        try publishChunked([("pack.bin", pack.bytes)], version: 1, repo: repo, deltas: 1)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        try c.set("keep_versions", "0")  // v1's chunk lists go with it: only v2's file is left
        #expect(try c.update(progress: nil))
        pack.records[20] = noise(pack.records[20].count, seed: 81)
        try publishChunked([("pack.bin", pack.bytes)], version: 2, repo: repo, deltas: 1)
        var lines = logged(c)
        #expect(try c.update(progress: nil))
        #expect(lines().contains { $0.contains("1 files from deltas") }, "\(lines())")
        try c.markGood()  // v1 goes, and its chunk lists with it
        // The same record again: v2's chunk page for it is neither v1's nor v3's.
        pack.records[20] = noise(pack.records[20].count, seed: 82)
        try publishChunked([("pack.bin", pack.bytes)], version: 3, repo: repo, deltas: 0)
        lines = logged(c)
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("pack.bin")) == pack.bytes)
        #expect(lines().contains { $0.contains("cut 1 files on disk into chunks") }, "\(lines())")
        #expect(lines().contains { $0.contains("1 files and chunks") || $0.contains("chunks in") }, "\(lines())")
        let fetched = lines().first { $0.hasPrefix("differential update:") }.flatMap { line in
            line.split(separator: " ").firstIndex(of: "of").map { UInt64(line.split(separator: " ")[$0 - 1]) ?? 0 }
        }
        #expect(fetched.map { $0 > 0 && $0 < UInt64(pack.bytes.count / 8) } == true, "\(lines())")
    }

    @Test func onlyDeltasThatPayAreKept() throws {
        let repo = TempDir()
        defer { repo.cleanup() }
        let doc = Pack.text(200_000, seed: 9)
        try publishChunked([("doc.json", doc), ("noise.bin", noise(100_000, seed: 1))], version: 1, repo: repo, deltas: 1)
        // noise.bin rewritten whole: its delta is as large as the file, not worth keeping.
        var doc2 = doc
        doc2[500] = 0x41
        let r = try publishChunked([("doc.json", doc2), ("noise.bin", noise(100_000, seed: 2))], version: 2, repo: repo, deltas: 1)
        #expect(r.deltas.count == 1 && r.deltas[0].built.deltas == 1)
        #expect(r.deltas[0].built.deltaBytes < 300, "one byte changed in 200 KB: \(r.deltas[0].built.deltaBytes) bytes with the page")
        let head = try Manifest.decode(try repo.read("head.json"))
        #expect(head.index?.deltas.first?.from == (try Manifest.decode(try repo.read("history/1/manifest.json"))).archiveDigest)
        // Nothing changed: no delta file at all.
        let same = try publishChunked([("doc.json", doc2), ("noise.bin", noise(100_000, seed: 2))], version: 3, repo: repo, deltas: 1)
        #expect(same.deltas.isEmpty)
    }
}
