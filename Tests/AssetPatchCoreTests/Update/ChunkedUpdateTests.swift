import Glibc
import Testing
@testable import AssetPatchCore

/// A pack file of records (random bytes and word-like text, 1 to 16 KiB each), deterministic
/// by seed, and edits of it: records rewritten in place, inserted, deleted.
struct Pack {
    var records: [[UInt8]]

    init(count: Int, seed: UInt64) {
        var x = seed | 1
        func next() -> UInt64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x }
        records = (0..<count).map { i in
            let size = 1024 + Int(next() % 15) * 1024
            return i % 2 == 0 ? noise(size, seed: next()) : Pack.text(size, seed: next())
        }
    }

    static func text(_ size: Int, seed: UInt64) -> [UInt8] {
        let words = ["texture", "mesh", "sound", "level", "bank", "shader", "the", "of", "asset", "frame", "light", "door"]
        var x = seed | 1
        var out: [UInt8] = []
        while out.count < size {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            out += Array(words[Int(x % UInt64(words.count))].utf8) + [x % 7 == 0 ? 10 : 32]
        }
        return Array(out.prefix(size))
    }

    var bytes: [UInt8] { records.flatMap { $0 } }

    /// Noise with every fourth 4 KiB block zeros: deflate saves a quarter, as much in chunks
    /// of their own as in one stream (no history helps noise).
    static func mostlyNoise(_ size: Int, seed: UInt64) -> [UInt8] {
        var out = noise(size, seed: seed)
        for block in stride(from: 0, to: size, by: 16 << 10) { out.replaceSubrange(block..<min(size, block + 4096), with: repeatElement(0, count: min(size, block + 4096) - block)) }
        return out
    }
}

/// The head of a repository published by `publishChunked`, as a client's `manifest_url`.
func headURL(_ repo: TempDir) -> String { URLs.fileURL(forPath: repo.path + "/head.json") }

/// What `c` logs from now on.
func logged(_ c: Client) -> () -> [String] {
    let lines = Locked<[String]>([])
    c.setLogger { _, line in lines.withLock { $0.append(line) } }
    return { lines.withLock { $0 } }
}

/// Publishes `files` as one release (format-1 manifest and format-2 head) with chunking from
/// `threshold` bytes (chunks that share history from `linkThreshold` below that, and from the
/// threshold up where chunks of their own would cost more than `ownChunkCostLimit` percent;
/// nil: never) in chunks of `chunkSize` on average; returns the publish result.
@discardableResult
func publishChunked(_ files: [(String, [UInt8])], version: Int64, repo: TempDir, threshold: UInt64 = 64 << 10,
                    linkThreshold: UInt64 = Publisher.defaultLinkThreshold, chunkSize: Int = 4096, seed: [UInt8]? = nil,
                    deltas: Int = 0, ownChunkCostLimit: Int? = nil) throws -> PublishResult {
    let staging = TempDir()
    defer { staging.cleanup() }
    for (p, b) in files { try staging.write(p, b) }
    var request = PublishRequest(source: staging.path, repo: repo.path)
    request.package = "test"
    request.version = version
    request.chunkThreshold = threshold
    request.ownChunkCostLimit = ownChunkCostLimit
    request.linkThreshold = linkThreshold
    request.chunkSize = chunkSize
    request.seeds = seed.map { [$0] } ?? []
    request.deltaReleases = deltas  // the chunks' route unless a test asks for deltas (DeltaUpdateTests)
    return try Publisher.publish(request)
}

/// Updates from format-2 heads: the release index read by range, chunked files rebuilt from
/// the chunks already installed plus the new ones, every byte checked.
@Suite struct ChunkedUpdateTests {

    @Test func aChangedPackCostsItsNewChunksAndIsRebuiltByteForByte() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        var pack = Pack(count: 160, seed: 5)
        let small: [(String, [UInt8])] = [("readme.txt", Array("one".utf8)), ("levels/a.json", Array("{}".utf8))]
        let first = try publishChunked(small + [("data/pack.bin", pack.bytes)], version: 1, repo: repo)
        #expect(first.chunkedFiles == 1)

        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("data/pack.bin")) == pack.bytes)
        #expect(try FS.readFile(try c.resolve("readme.txt")) == Array("one".utf8))
        #expect(statusOf { _ = try c.resolve(IndexLocation.entryName) } == .notFound, "the index is not a resource")

        // Three records rewritten, one inserted (shifting everything after it), one deleted.
        var newBytes = 0
        for i in [20, 70, 120] {
            pack.records[i] = noise(pack.records[i].count, seed: UInt64(1000 + i))
            newBytes += pack.records[i].count
        }
        let inserted = Pack.text(12 << 10, seed: 77)
        pack.records.insert(inserted, at: 40)
        newBytes += inserted.count
        pack.records.remove(at: 100)
        let second = try publishChunked(small + [("data/pack.bin", pack.bytes)], version: 2, repo: repo)

        let preview = try #require(try c.preview())
        #expect(preview.wholeArchiveReason == nil)
        #expect(preview.fetchedFiles == ["data/pack.bin"])
        #expect(preview.linkedFiles == 2)
        // The new records, plus at most about two chunks around each of the five edits.
        #expect(preview.transferBytes <= UInt64(newBytes) + 5 * 3 * 8192, "\(preview.transferBytes) bytes for \(newBytes) new")
        #expect(preview.transferBytes * 10 < second.archiveSize)

        let lines = logged(c)
        #expect(try c.update(progress: nil))
        #expect(c.currentVersion == 2)
        #expect(try FS.readFile(try c.resolve("data/pack.bin")) == pack.bytes)
        #expect(lines().contains { $0.hasPrefix("differential update:") })
        #expect(!lines().contains { $0.contains("whole archive") }, "\(lines())")
        // Nothing is left over from the update, and the page store holds what the releases reach.
        #expect(try FS.list(c.store.downloadsDir).isEmpty)
        let pages = PageStore(c.store)
        var reachable = Set<String>()
        for id in try FS.list(c.store.releasesDir) {
            reachable.formUnion(pages.reachable(root: try #require(try c.store.loadRelease(id).indexRoot)))
        }
        #expect(Set(try FS.list(pages.dir)) == reachable)
        #expect(reachable.count >= first.indexPages)
    }

    @Test func aCheckThatFindsNothingFetchesNoPagesAndTheIndexIsReadOnce() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let files = (0..<600).map { ("f/\($0).txt", Array("file \($0)".utf8)) }
        try publishChunked(files, version: 1, repo: repo)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        let lines = logged(c)
        #expect(try c.update(progress: nil))
        #expect(lines().contains { $0.contains("new index pages") })
        let before = lines().count
        #expect(try c.update(progress: nil) == false)
        #expect(!lines()[before...].contains { $0.contains("index pages") })

        // One file changed in 600: the file-table page that lists it is new, the others are not.
        var changed = files
        changed[300].1 = Array("changed".utf8)
        try publishChunked(changed, version: 2, repo: repo)
        let pageCount = try FS.list(PageStore(c.store).dir).count
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("f/300.txt")) == Array("changed".utf8))
        let added = try FS.list(PageStore(c.store).dir).count - pageCount
        #expect(added == 2, "the root and the one file page listing the changed file are new: \(added)")
    }

    /// A page damaged on disk after it was stored (a power cut on a disk that lies, a stray
    /// write) is fetched again by the next update that needs it, not an ERR_IO.
    @Test func aDamagedStoredPageIsFetchedAgain() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let files = (0..<600).map { ("f/\($0).txt", Array("file \($0)".utf8)) }
        try publishChunked(files, version: 1, repo: repo)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        #expect(try c.update(progress: nil))
        let dir = PageStore(c.store).dir
        let stored = try FS.list(dir).filter { Hex.isHex($0, length: 64) }
        #expect(stored.count > 2)
        for name in stored { try FS.writeAtomically(dir + "/" + name, Array("damaged".utf8)) }
        var changed = files
        changed[300].1 = Array("changed".utf8)
        try publishChunked(changed, version: 2, repo: repo)
        let lines = logged(c)
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("f/300.txt")) == Array("changed".utf8))
        #expect(try FS.readFile(try c.resolve("f/7.txt")) == Array("file 7".utf8))
        #expect(lines().contains { $0.contains("damaged on disk; fetching it again") })
    }

    @Test func wholeArchiveRoutesReadTheIndexFromTheDownload() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let pack = Pack(count: 60, seed: 9).bytes
        try publishChunked([("pack.bin", pack), ("a.txt", Array("a".utf8))], version: 1, repo: repo)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        try c.set("differential", "off")
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("pack.bin")) == pack)
        #expect(try c.store.loadRelease(try #require(c.store.loadState().active).id).indexRoot != nil)
        // The chunk lists read from the whole archive serve the next differential update.
        var next = Pack(count: 60, seed: 9)
        next.records[30] = noise(next.records[30].count, seed: 3)
        try publishChunked([("pack.bin", next.bytes), ("a.txt", Array("a".utf8))], version: 2, repo: repo)
        try c.set("differential", "on")
        let preview = try #require(try c.preview())
        #expect(preview.wholeArchiveReason == nil)
        #expect(preview.transferBytes < UInt64(next.records[30].count) + 4 * 8192)
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("pack.bin")) == next.bytes)
    }

    @Test func theFormatOneManifestBesideTheHeadStillUpdatesAndSkipsTheIndex() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let pack = Pack(count: 40, seed: 2).bytes
        try publishChunked([("pack.bin", pack), ("b.txt", Array("b".utf8))], version: 1, repo: repo)
        let manifest = try Manifest.decode(try repo.read("manifest.json"))
        #expect(manifest.kind == .format1)
        #expect(String(decoding: try repo.read("manifest.json"), as: UTF8.self).contains("\"\(IndexLocation.entryName)\""),
                "a client before 0.4 sees the index as a file")
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", URLs.fileURL(forPath: repo.path + "/manifest.json"))
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("pack.bin")) == pack)
        // This client reads the same release's head next: nothing new.
        try c.set("manifest_url", headURL(repo))
        #expect(try c.update(progress: nil) == false)
    }

    @Test func anInstalledChunkThatChangedOnDiskCostsTheWholeArchiveNotAWrongFile() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        var pack = Pack(count: 60, seed: 4)
        try publishChunked([("pack.bin", pack.bytes)], version: 1, repo: repo)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        #expect(try c.update(progress: nil))
        let installed = try c.resolve("pack.bin")
        chmod(installed, 0o644)
        let f = try File.open(installed, O_WRONLY)
        try f.pwrite([0xff, 0xfe, 0xfd], at: 5000)
        pack.records[50] = noise(pack.records[50].count, seed: 8)
        try publishChunked([("pack.bin", pack.bytes)], version: 2, repo: repo)
        let lines = logged(c)
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("pack.bin")) == pack.bytes)
        #expect(lines().contains { $0.contains("the bytes on disk it copied changed") && $0.contains("whole archive") }, "\(lines())")
    }

    @Test func aHeadWhoseIndexLiesGetsAClearStatusAndKeepsTheRelease() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        try publishChunked([("a.txt", Array("a".utf8))], version: 1, repo: repo)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        #expect(try c.update(progress: nil))
        try publishChunked([("a.txt", Array("b".utf8)), ("pack.bin", Pack(count: 30, seed: 1).bytes)], version: 2, repo: repo)
        let good = try repo.read("head.json")
        let text = String(decoding: good, as: UTF8.self)
        let head = try Manifest.decode(good)
        let index = try #require(head.index)
        // A root of another sha256, a root size one byte short, an offset one byte off.
        let lies = [
            text.replacing(index.root.hex, with: String(repeating: "ab", count: 32)),
            text.replacing("\"root_size\": \(index.root.compressedSize)", with: "\"root_size\": \(index.root.compressedSize - 1)"),
            text.replacing("\"offset\": \(index.offset)", with: "\"offset\": \(index.offset + 1)"),
        ]
        for lie in lies {
            #expect(lie != text)
            try MutableFile.write(repo.path + "/head.json", Array(lie.utf8))
            let status = statusOf { _ = try c.update(progress: nil) }
            #expect(status == .integrity || status == .manifest, "\(String(describing: status))")
            #expect(c.currentVersion == 1)
            #expect(try FS.readFile(try c.resolve("a.txt")) == Array("a".utf8))
        }
        try MutableFile.write(repo.path + "/head.json", good)
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("a.txt")) == Array("b".utf8))
    }

    @Test func theBundlesPackAndAFormatOneReleaseLendTheirChunksOnceScanned() throws {
        let repo = TempDir(), data = TempDir(), bundle = TempDir(), old = TempDir()
        defer { repo.cleanup(); data.cleanup(); bundle.cleanup(); old.cleanup() }
        var pack = Pack(count: 120, seed: 21)
        try bundle.write("data/pack.bin", pack.bytes)
        pack.records[60] = noise(pack.records[60].count, seed: 5)
        try publishChunked([("data/pack.bin", pack.bytes)], version: 1, repo: repo)
        // A client that has only the app's bundle: the bundle's pack is cut and hashed once.
        let c = try Client(dataDir: data.path, bundleDir: bundle.path)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        let lines = logged(c)
        let preview = try #require(try c.preview())
        #expect(preview.transferBytes < UInt64(pack.records[60].count) + 4 * 8192, "\(preview.transferBytes)")
        #expect(lines().contains { $0.hasPrefix("cut 1 files on disk") })
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("data/pack.bin")) == pack.bytes)

        // A client that installed release 1 from manifest.json (no chunk lists) moving to heads.
        let o = try Client(dataDir: old.path, bundleDir: nil)
        defer { o.close() }
        try o.set("manifest_url", URLs.fileURL(forPath: repo.path + "/manifest.json"))
        #expect(try o.update(progress: nil))
        pack.records.insert(Pack.text(9000, seed: 4), at: 10)
        try publishChunked([("data/pack.bin", pack.bytes)], version: 2, repo: repo)
        try o.set("manifest_url", headURL(repo))
        let p2 = try #require(try o.preview())
        #expect(p2.transferBytes < 9000 + 4 * 8192, "\(p2.transferBytes)")
        #expect(try o.update(progress: nil))
        #expect(try FS.readFile(try o.resolve("data/pack.bin")) == pack.bytes)
    }

    @Test func aScanIsCachedUnderTheFilesFingerprintAndDroppedWhenTheFileChanges() throws {
        let data = TempDir(), files = TempDir()
        defer { data.cleanup(); files.cleanup() }
        let store = try Store(root: data.path)
        let bytes = Pack(count: 40, seed: 8).bytes
        try files.write("pack.bin", bytes)
        let chunker = Chunker(averageSize: 4096)!
        var now = wallClockNanos()
        var scan = ChunkScan(store: store, chunker: chunker, cancel: CancelToken())
        scan.clock = { now }
        let first = try #require(try scan.chunks(of: files.path + "/pack.bin"))
        #expect(first.reduce(0) { $0 + Int($1.size) } == bytes.count)
        #expect(scan.scanned == 1)
        _ = try scan.chunks(of: files.path + "/pack.bin")
        #expect(scan.scanned == 2, "changed within the racy window: not cached")
        now += 3_000_000_000
        _ = try scan.chunks(of: files.path + "/pack.bin")
        #expect(scan.scanned == 3)
        let cached = try #require(try scan.chunks(of: files.path + "/pack.bin"))
        #expect(scan.scanned == 3 && cached == first, "cached")
        // Rewritten: a new fingerprint, scanned again; the stale entry goes at a prune.
        try files.write("pack.bin", Array(bytes.reversed()))
        now += 3_000_000_000
        let again = try #require(try scan.chunks(of: files.path + "/pack.bin"))
        #expect(scan.scanned == 4 && again != first)
        try FS.unlink(files.path + "/pack.bin")
        ChunkScan.prune(store)
        #expect(try FS.list(data.path + "/chunk-scans").isEmpty)
    }
}
