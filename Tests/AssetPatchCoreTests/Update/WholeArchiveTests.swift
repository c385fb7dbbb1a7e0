import Glibc
import Testing
@testable import AssetPatchCore

/// The whole-archive route with per-file locations: the workers check every file against its
/// own sha256 as the archive arrives, so the archive's digest is taken only when a file must be
/// read from the archive itself or its directory disagrees with the manifest; the files move
/// from the download's directory into the release.
@Suite struct WholeArchiveTests {
    let files: [(String, [UInt8])] = (0..<12).map { i in
        i % 4 == 0 ? ("text/\(i).txt", Array(String(repeating: "line \(i)\n", count: 3000).utf8))
                   : ("bin/\(i).bin", noise(20_000 + 1000 * i, seed: UInt64(i + 1)))
    } + [("same/a.bin", noise(5000, seed: 77)), ("same/b.bin", noise(5000, seed: 77)), ("empty", [])]

    func client(_ data: TempDir, _ url: String) throws -> Client {
        let c = try Client(dataDir: data.path, bundleDir: nil)
        try c.set("manifest_url", url)
        try c.set("differential", "off")
        return c
    }

    @Test func extractedFilesMoveIntoTheReleaseAndNothingIsLeftBehind() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let c = try client(data, try publishRelease(files, version: 1, repo: repo))
        defer { c.close() }
        #expect(try c.update(progress: nil))
        for (path, bytes) in files { #expect(try FS.readFile(try c.resolve(path)) == bytes, "\(path)") }
        #expect(try FS.list(data.path + "/downloads").isEmpty, "the archive and the extracted files are gone")
        // Two paths of the same content: one moved, the other linked to it.
        let pa = try c.resolve("same/a.bin"), pb = try c.resolve("same/b.bin"), pt = try c.resolve("text/0.txt")
        var a = stat(), b = stat(), t = stat()
        #expect(lstat(pa, &a) == 0 && lstat(pb, &b) == 0 && lstat(pt, &t) == 0)
        #expect(a.st_ino == b.st_ino && a.st_nlink == 2)
        #expect(t.st_nlink == 1 && t.st_mode & 0o222 == 0)
    }

    @Test func aDamagedDirectoryBehindIntactFilesIsCaughtByTheArchiveDigest() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let url = try publishRelease(files, version: 1, repo: repo)
        let m = try Manifest.decode(try repo.read("manifest.json"))
        // One byte of a central directory entry's name: every file's bytes still match.
        let archive = repo.path + "/" + m.archiveURL
        var bytes = try FS.readFile(archive, limit: 1 << 30)
        let last = m.files.map { $0.location!.dataOffset + $0.location!.compressedSize }.max()!
        let at = try #require(bytes.indices.first { $0 >= Int(last) && bytes[$0] == UInt8(ascii: "t") })
        bytes[at] = UInt8(ascii: "T")
        try FS.writeAtomically(archive, bytes)
        let c = try client(data, url)
        defer { c.close() }
        #expect(statusOf { _ = try c.update(progress: nil) } == .integrity)
        #expect(c.currentVersion == 0)
        #expect(!FS.exists(c.store.partialPath(m.archiveDigest)), "the damaged download is dropped")
    }

    @Test func aResumedPartialWithDamagedBytesStartsOverOnce() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let url = try publishRelease(files, version: 1, repo: repo)
        let m = try Manifest.decode(try repo.read("manifest.json"))
        let original = try FS.readFile(repo.path + "/" + m.archiveURL, limit: 1 << 30)
        let c = try client(data, url)
        defer { c.close() }
        // What a power cut can leave: the first two thirds of the archive kept, with bytes inside
        // one file's data that never reached the disk (zeros).
        var partial = Array(original[0..<(original.count * 2 / 3)])
        let victim = m.files.first { $0.path == "bin/5.bin" }!.location!
        for i in Int(victim.dataOffset)..<Int(victim.dataOffset) + 512 { partial[i] = 0 }
        try FS.makeDirectories(data.path + "/downloads")
        try FS.writeAtomically(c.store.partialPath(m.archiveDigest), partial)
        try FS.writeAtomically(c.store.partialMetaPath(m.archiveDigest), Array(PartialMeta(url: repo.path + "/" + m.archiveURL).toJSON().serialized().utf8))
        let logged = LogLines()
        c.setLogger { _, line in logged.add(line) }
        #expect(try c.update(progress: nil))
        for (path, bytes) in files { #expect(try FS.readFile(try c.resolve(path)) == bytes, "\(path)") }
        #expect(logged.lines.contains { $0.contains("do not complete the archive's digest") && $0.contains("downloading the archive again") },
                "\(logged.lines)")
    }
}
