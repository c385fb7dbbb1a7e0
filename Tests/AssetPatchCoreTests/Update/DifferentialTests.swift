import Glibc
import Testing
@testable import AssetPatchCore

/// A manifest file at a made-up location: `start` is the local header's offset; the data follows
/// a 30-byte header and the name, and takes `compressed` bytes.
private func located(_ path: String, sha: String = "", size: UInt64 = 10, at start: UInt64, compressed: UInt64) -> ManifestFile {
    let data = start + 30 + UInt64(path.utf8.count)
    return ManifestFile(path: path, size: size, sha256: sha.isEmpty ? String(repeating: "0", count: 63) + String(start % 10) : sha,
                        location: ArchiveLocation(headerOffset: start, dataOffset: data, compressedSize: compressed, method: 8))
}

@Suite struct DeltaPlanTests {
    @Test func neighboursCoalesceWhileTheGapsStaySmall() {
        let a = located("a", at: 0, compressed: 100)          // 0..<131
        let b = located("b", at: 131 + 10, compressed: 100)   // gap 10
        let c = located("c", at: 5000, compressed: 100)       // gap ~4.7 KB
        let d = located("d", at: 5131, compressed: 3000)      // adjacent to c
        let ranges = FilePlan.coalesce([a, b, c, d], gap: 64, maxRequest: 2000)
        #expect(ranges.map(\.entries.count) == [2, 1, 1], "a+b merge (gap 10 <= 64); c alone (gap); d alone (c+d > 2000)")
        #expect(ranges[0].start == 0 && ranges[0].end == b.location!.range.upperBound)
        #expect(ranges.reduce(0) { $0 + $1.count } == a.location!.range.count + 10 + b.location!.range.count + c.location!.range.count + d.location!.range.count)
        #expect(FilePlan.coalesce([a, b], gap: 9, maxRequest: 1 << 20).count == 2, "a gap one byte too wide stays two requests")
        // A wide gap is joined only when it is small next to the wanted bytes: 4.7 KB of gap
        // for 393 wanted bytes is not, for 100 KB wanted it is.
        #expect(FilePlan.coalesce([a, b, c], gap: 32 << 10, maxRequest: 1 << 20).count == 2)
        let big = located("big", at: 5000, compressed: 100_000)
        #expect(FilePlan.coalesce([a, b, big], gap: 32 << 10, maxRequest: 1 << 20).count == 1)
        // Gaps under 512 bytes always join (a request's headers cost about that).
        let near = located("near", at: 131 + 10 + 131 + 400, compressed: 10)
        #expect(FilePlan.coalesce([a, b, near], gap: 32 << 10, maxRequest: 1 << 20).count == 1)
    }

    @Test func sourcesPreferInstalledThenFetchedThenBundleAndFetchEachContentOnce() throws {
        let shaA = String(repeating: "a", count: 64), shaB = String(repeating: "b", count: 64)
        let shaC = String(repeating: "c", count: 64), shaD = String(repeating: "d", count: 64)
        let files = [located("x/one", sha: shaA, at: 0, compressed: 50),
                     located("two", sha: shaB, at: 100, compressed: 50),
                     located("three", sha: shaC, at: 200, compressed: 50),
                     located("dup-late", sha: shaD, at: 1000, compressed: 50),
                     located("dup-early", sha: shaD, at: 300, compressed: 50)]
        let plan = try #require(FilePlan.make(files, local: { f in
            switch f.sha256 {
            case shaA: return .installed(InstalledFile(root: "/r/", path: "one", size: 1))
            case shaB: return .fetched("/d/b")
            case shaC: return .bundle("/bundle/three")
            default: return nil
            }
        }, gap: 0, maxRequest: 1 << 20))
        #expect(plan.files.map(\.source) == [.installed(InstalledFile(root: "/r/", path: "one", size: 1)), .fetched("/d/b"), .bundle("/bundle/three"), .archive, .archive])
        #expect(plan.fetchEntries == 1, "one content, two paths: fetched once")
        #expect(plan.ranges.first?.entries.first?.path == "dup-early", "the first copy in archive order")
        #expect(plan.fetchBytes == files[4].location!.range.count)
    }

    @Test func aFileWithoutLocationMeansNoPlanAndTheShareDecidesWhetherRangesPayOff() {
        var files = [located("a", at: 0, compressed: 600), located("b", at: 700, compressed: 200)]
        let plan = FilePlan.make(files, local: { $0.path == "a" ? .installed(InstalledFile(root: "/", path: "a", size: 1)) : nil })!
        #expect(plan.fetchBytes == 231)
        #expect(plan.paysOff(archiveSize: 1000, maxPercent: 75) && plan.paysOff(archiveSize: 308, maxPercent: 75))
        #expect(!plan.paysOff(archiveSize: 307, maxPercent: 75) && plan.paysOff(archiveSize: 231, maxPercent: 100))
        files[1].location = nil
        #expect(FilePlan.make(files, local: { _ in nil }) == nil)
    }
}

@Suite struct RangeReceiverTests {
    /// A real archive of `files` and the manifest entries (with locations) publish would write.
    func archive(_ dir: TempDir, _ files: [(String, [UInt8])]) throws -> (path: String, entries: [ManifestFile]) {
        for (p, b) in files { try dir.write("src/" + p, b) }
        let w = try ZipWriter(path: dir.path + "/a.zip")
        var entries: [ManifestFile] = []
        for (p, _) in files { entries.append(try w.add(name: p, sourcePath: dir.path + "/src/" + p)) }
        try w.finish()
        return (dir.path + "/a.zip", entries)
    }

    /// Pushes the range's bytes of `bytes` in chunks of `step`; returns the files kept.
    func receive(_ range: FetchRange, _ bytes: [UInt8], dir: String, step: Int) throws -> [String: String] {
        var kept: [String: String] = [:]
        let r = RangeReceiver(range, dir: dir, shown: "test.zip") { f, path in kept[f.path] = path }
        var offset = Int(range.start)
        while offset < Int(range.end) {
            let n = min(step, Int(range.end) - offset)
            try bytes[offset..<offset + n].withUnsafeBytes { try r.push($0) }
            offset += n
        }
        try r.finish()
        return kept
    }

    func message(_ body: () throws -> Void) -> String? {
        do { try body() } catch let f as DifferentialFallback { return f.message } catch { return "other: \(error)" }
        return nil
    }

    @Test func aCoalescedRangeYieldsEveryFileVerifiedWhateverTheChunking() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let files: [(String, [UInt8])] = [("a.txt", Array(String(repeating: "compressible ", count: 3000).utf8)),
                                          ("skip.bin", noise(20_000, seed: 3)), ("empty", []), ("sub/c.bin", noise(70_000, seed: 4))]
        let (path, entries) = try archive(dir, files)
        let bytes = try FS.readFile(path)
        let wanted = entries.filter { $0.path != "skip.bin" }
        // One request over all of them, the skipped entry's bytes included.
        let range = FetchRange(start: wanted.first!.location!.headerOffset, end: wanted.last!.location!.range.upperBound, entries: wanted)
        for step in [1, 7, 4096, 1 << 20] {
            let out = dir.path + "/out\(step)"
            try FS.makeDirectories(out)
            let kept = try receive(range, bytes, dir: out, step: step)
            #expect(Set(kept.keys) == ["a.txt", "empty", "sub/c.bin"], "step \(step)")
            for (p, b) in files where p != "skip.bin" {
                #expect(try FS.readFile(kept[p]!) == b, "\(p), step \(step)")
                #expect(kept[p] == out + "/" + entries.first { $0.path == p }!.sha256)
            }
            #expect(try FS.list(out).allSatisfy { !$0.hasSuffix(".part") })
        }
    }

    @Test func wrongBytesExtraBytesAndShortRangesAreRefusedNamingTheFile() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let (path, entries) = try archive(dir, [("one.bin", noise(5000, seed: 5)), ("two.txt", Array(String(repeating: "two ", count: 900).utf8))])
        let good = try FS.readFile(path)
        let range = FetchRange(start: entries[0].location!.headerOffset, end: entries[1].location!.range.upperBound, entries: entries)
        let out = dir.path + "/out"
        try FS.makeDirectories(out)

        var flipped = good
        flipped[Int(entries[0].location!.dataOffset) + 100] ^= 0xFF   // stored data: sha256 (and CRC) catch it
        #expect(message { _ = try receive(range, flipped, dir: out, step: 512) }?.contains("\"one.bin\"") == true)

        var renamed = good
        renamed[Int(entries[1].location!.headerOffset) + 30] = UInt8(ascii: "T")  // the name in the local header
        #expect(message { _ = try receive(range, renamed, dir: out, step: 512) }?.contains("\"two.txt\" has a local header that disagrees") == true)

        var deflated = good
        deflated[Int(entries[1].location!.dataOffset) + 3] ^= 0x55
        #expect(message { _ = try receive(range, deflated, dir: out, step: 512) }?.contains("\"two.txt\"") == true)

        let r = RangeReceiver(range, dir: out, shown: "test.zip") { _, _ in }
        let tooMany = [UInt8](repeating: 0, count: Int(range.count) + 1)
        #expect(message { try tooMany.withUnsafeBytes { try r.push($0) } }?.contains("more than the") == true)

        let short = RangeReceiver(range, dir: out, shown: "test.zip") { _, _ in }
        try good[Int(range.start)..<Int(range.end) - 10].withUnsafeBytes { try short.push($0) }
        #expect(message { try short.finish() }?.contains("ended early") == true)
        short.abandon()
        // The first file verified before the failures is kept; nothing half-written remains.
        #expect(try FS.list(out).sorted() == [entries[0].sha256])
    }
}

@Suite struct BundleDigestTests {
    @Test func digestsAreCachedPerFileAndAChangedFileIsHashedAgain() throws {
        let bundle = TempDir(), data = TempDir()
        defer { bundle.cleanup(); data.cleanup() }
        try bundle.write("a.bin", noise(1000, seed: 1))
        try bundle.write("sub/b.bin", noise(2000, seed: 2))
        try bundle.write("c.bin", noise(3000, seed: 3))
        var d = BundleDigests(bundleDir: bundle.path, cachePath: data.path + "/bundle-digests")
        d.clock = { wallClockNanos() + 10_000_000_000 }  // the files are old by then: not racy
        let never = CancelToken()
        var found = try d.digests(sizes: [1000, 2000], cancel: never)
        #expect(d.hashedCount == 2, "only files of a wanted size are hashed")
        #expect(found[try Digest.hexOfFile(bundle.path + "/sub/b.bin")] == bundle.path + "/sub/b.bin")
        found = try d.digests(sizes: [1000, 2000], cancel: never)
        #expect(d.hashedCount == 0 && found.count == 2, "the second time from the cache")
        // An app upgrade rewrites a file (same size): its fingerprint moves, it is hashed again.
        try bundle.write("a.bin", noise(1000, seed: 9))
        found = try d.digests(sizes: [1000, 2000, 3000], cancel: never)
        #expect(d.hashedCount == 2, "a.bin again and c.bin for the first time")
        #expect(found[try Digest.hexOfFile(bundle.path + "/a.bin")] == bundle.path + "/a.bin")
        #expect(found[Hex.encode(noise(0))] == nil)
        // Another bundle directory does not use this cache.
        var other = BundleDigests(bundleDir: bundle.path + "/sub", cachePath: data.path + "/bundle-digests")
        _ = try other.digests(sizes: [2000], cancel: never)
        #expect(other.hashedCount == 1)
    }

    /// A file changed within the racy window of being hashed may change again without its
    /// fingerprint moving: its digest is used but not cached, until the file has settled.
    @Test func aDigestIsNotCachedWhileTheFileMayStillChangeUnseen() throws {
        let bundle = TempDir(), data = TempDir()
        defer { bundle.cleanup(); data.cleanup() }
        try bundle.write("a.bin", noise(1000, seed: 1))
        var d = BundleDigests(bundleDir: bundle.path, cachePath: data.path + "/bundle-digests")
        let never = CancelToken()
        let written = wallClockNanos()
        d.clock = { written + BundleDigests.racyWindowNs / 2 }
        #expect(try d.digests(sizes: [1000], cancel: never).count == 1)
        #expect(try d.digests(sizes: [1000], cancel: never).count == 1)
        #expect(d.hashedCount == 1, "hashed again: changed less than the window before it was hashed")
        d.clock = { written + BundleDigests.racyWindowNs + 1_000_000_000 }
        _ = try d.digests(sizes: [1000], cancel: never)
        #expect(d.hashedCount == 1, "hashed once more, now settled, and cached")
        _ = try d.digests(sizes: [1000], cancel: never)
        #expect(d.hashedCount == 0)
    }
}

@Suite struct DifferentialClientTests {
    @Test func anUpdateFetchesOnlyWhatNoInstalledReleaseOrBundleHas() throws {
        let repo = TempDir(), data = TempDir(), bundle = TempDir()
        defer { repo.cleanup(); data.cleanup(); bundle.cleanup() }
        var v1: [(String, [UInt8])] = []
        for i in 0..<40 { v1.append(("f\(i).bin", noise(20_000 + i, seed: UInt64(i + 1)))) }
        try bundle.write("from-bundle.bin", noise(30_000, seed: 777))
        let c = try Client(dataDir: data.path, bundleDir: bundle.path)
        try c.set("manifest_url", try publishRelease(v1, version: 1, repo: repo))
        #expect(try c.update(progress: nil))

        var v2 = v1
        v2[3].1 = noise(20_003, seed: 1000)                          // changed
        v2.remove(at: 10)                                             // removed
        v2.append(("added.txt", Array("new".utf8)))                   // added
        v2.append(("from-bundle.bin", noise(30_000, seed: 777)))      // the bundle has it
        v2.append(("copy-of-f5.bin", v1[5].1))                        // an installed content at a new path
        try c.set("manifest_url", try publishRelease(v2, version: 2, repo: repo))
        let manifest = try Manifest.decode(try FS.readFile(repo.path + "/manifest.json"), trustedKeys: [], source: "m")
        let located = Dictionary(manifest.files.map { ($0.path, $0.location!) }, uniquingKeysWith: { a, _ in a })
        let needed = UInt64(located["f3.bin"]!.range.count + located["added.txt"]!.range.count)

        let checked = try #require(try c.check())
        #expect(checked.version == 2)
        #expect(checked.downloadBytes >= needed && checked.downloadBytes <= needed + FilePlan.coalesceGap,
                "\(checked.downloadBytes) bytes planned for \(needed) bytes of changed entries")

        var seen: [Progress] = []
        #expect(try c.update(progress: { seen.append($0); return false }))
        let download = seen.filter { $0.phase == .download }
        #expect(download.allSatisfy { $0.bytesTotal == checked.downloadBytes && $0.filesTotal == 2 })
        #expect(zip(download, download.dropFirst()).allSatisfy { $0.bytesDone <= $1.bytesDone })
        #expect(download.last?.bytesDone == checked.downloadBytes && download.last?.filesDone == 2)
        for (p, b) in v2 { #expect(try FS.readFile(try c.resolve(p)) == b, "\(p)") }
        #expect(statusOf { _ = try c.resolve("f10.bin") } == .notFound)
        #expect(!FS.exists(data.path + "/downloads/" + manifest.archiveDigest + ".files"), "fetched files are dropped once installed")
    }

    @Test func locationsThatLieFallBackToTheWholeArchiveWhichRefusesThem() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        var files: [(String, [UInt8])] = []
        for i in 0..<10 { files.append(("f\(i).bin", noise(10_000, seed: UInt64(i + 1)))) }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        try c.set("manifest_url", try publishRelease(files, version: 1, repo: repo))
        #expect(try c.update(progress: nil))
        files[9].1 = noise(10_000, seed: 99)
        let logged = LogLines()
        c.setLogger { _, m in logged.add(m) }
        // The changed (last) file's location points one byte off: the range receiver refuses the
        // header, the whole archive is read instead, and its headers show the manifest wrong.
        try c.set("manifest_url", try publishRelease(files, version: 2, repo: repo) { shiftLocation(&$0, file: 9) })
        #expect(statusOf { _ = try c.update(progress: nil) } == .manifest)
        #expect(c.currentVersion == 1)
        #expect(try FS.readFile(try c.resolve("f9.bin")) == noise(10_000, seed: 10))
        #expect(logged.lines.contains { $0.contains("\"f9.bin\"") && $0.contains("downloading the whole archive instead") }, "\(logged.lines)")
    }
}

final class LogLines: @unchecked Sendable {  // lines guarded by `lock`
    private let lock = Condition()
    private var items: [String] = []
    func add(_ line: String) { lock.locked { items.append(line) } }
    var lines: [String] { lock.locked { items } }
}

@Suite struct ArchiveFollowerTests {
    let files: [(String, [UInt8])] = (0..<24).map { i in
        i % 3 == 0 ? ("t/\(i).txt", Array(String(repeating: "text \(i) ", count: 500 * (i + 1)).utf8))
                   : ("b/\(i).bin", noise(3000 * (i % 5) + 17, seed: UInt64(i)))
    } + [("empty", [])]

    @Test func entriesAreDealtInArchiveOrderAcrossWorkersBalancedBySize() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let (_, entries) = try RangeReceiverTests().archive(dir, files)
        for workers in [1, 2, 3, 8, 100] {
            let ranges = ArchiveFollower.deal(entries, workers: workers)
            #expect(ranges.count == min(workers, entries.count))
            #expect(Set(ranges.flatMap(\.entries).map(\.path)) == Set(entries.map(\.path)))
            for r in ranges {
                let offsets = r.entries.map { $0.location!.headerOffset }
                #expect(offsets == offsets.sorted() && r.start == offsets.first! && r.end == r.entries.last!.location!.range.upperBound)
            }
            let loads = ranges.map { $0.entries.reduce(0) { $0 + $1.location!.range.count } }
            #expect(loads.max()! - loads.min()! <= entries.map { $0.location!.range.count }.max()!, "\(workers) workers")
        }
    }

    /// Writes `bytes` into `part` in steps of `step`, advancing the follower after each.
    func grow(_ part: File, _ bytes: [UInt8], from: Int = 0, step: Int, _ follower: ArchiveFollower) throws {
        var offset = from
        while offset < bytes.count {
            let n = min(step, bytes.count - offset)
            try bytes[offset..<offset + n].withUnsafeBytes { try part.pwrite($0, at: UInt64(offset)) }
            offset += n
            follower.advance(to: UInt64(offset))
        }
    }

    @Test func workersExtractEveryEntryOfAGrowingFileWithoutReadingPastIt() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let (path, entries) = try RangeReceiverTests().archive(dir, files)
        let bytes = try FS.readFile(path)
        for (workers, step) in [(1, 1 << 20), (3, 777), (4, 1)] {
            let out = dir.path + "/out\(workers)", partPath = dir.path + "/part\(workers)"
            try FS.makeDirectories(out)
            let follower = ArchiveFollower(path: partPath, entries: entries, workers: workers, dir: out, shown: "a.zip", cancel: CancelToken())
            try follower.start(available: 0)
            usleep(20_000)  // the workers wait for bytes before the download has created the file
            let part = try File.open(partPath, O_RDWR | O_CREAT, mode: 0o644)
            try grow(part, bytes, step: step, follower)
            let (kept, stopped) = follower.finish()
            #expect(stopped.isEmpty, "\(stopped)")
            #expect(kept == Set(entries.map(\.digest)))
            for (p, b) in files {
                #expect(try FS.readFile(out + "/" + entries.first { $0.path == p }!.sha256) == b, "\(p) with \(workers) workers")
            }
            #expect(try FS.list(out).allSatisfy { !$0.hasPrefix(".") }, "nothing half-written")
        }
    }

    @Test func aStopMidwayKeepsTheEntriesThatArrivedAndBadBytesStopOnlyTheirWorker() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let (path, entries) = try RangeReceiverTests().archive(dir, files)
        let bytes = try FS.readFile(path)
        let half = bytes.count / 2
        // The download stops at half: the entries wholly before it are kept, the rest not.
        var out = dir.path + "/half"
        try FS.makeDirectories(out)
        var part = try File.open(dir.path + "/p1", O_RDWR | O_CREAT, mode: 0o644)
        var follower = ArchiveFollower(path: dir.path + "/p1", entries: entries, workers: 2, dir: out, shown: "a.zip", cancel: CancelToken())
        try follower.start(available: 0)
        try grow(part, Array(bytes[0..<half]), step: 4096, follower)
        let (kept, stopped) = follower.finish()
        #expect(stopped.isEmpty)
        #expect(kept == Set(entries.filter { $0.location!.range.upperBound <= UInt64(half) }.map(\.digest)))
        #expect(try FS.list(out).allSatisfy { !$0.hasPrefix(".") })

        // Bytes already on disk (a resume) are read first; a corrupt entry stops its worker
        // with the file named, and every other entry is still kept.
        out = dir.path + "/bad"
        try FS.makeDirectories(out)
        var bad = bytes
        let victim = entries[5]
        bad[Int(victim.location!.dataOffset) + 1] ^= 0xFF
        part = try File.open(dir.path + "/p2", O_RDWR | O_CREAT, mode: 0o644)
        try bad[0..<half].withUnsafeBytes { try part.pwrite($0, at: 0) }
        follower = ArchiveFollower(path: dir.path + "/p2", entries: entries, workers: 2, dir: out, shown: "a.zip", cancel: CancelToken())
        try follower.start(available: UInt64(half))
        try grow(part, bad, from: half, step: 1000, follower)
        let (kept2, stopped2) = follower.finish()
        #expect(stopped2.count == 1 && stopped2[0].contains("\"\(victim.path)\""), "\(stopped2)")
        #expect(!kept2.contains(victim.digest) && kept2.count >= entries.count / 2)
        for d in kept2 { #expect(try Digest.hexOfFile(out + "/" + d.hex) == d.hex) }
    }
}
