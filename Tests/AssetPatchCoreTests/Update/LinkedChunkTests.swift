import Glibc
import Testing
@testable import AssetPatchCore

/// Files whose chunks share history (`LinkedIndex`): published as one deflate stream with a sync
/// flush per chunk, listed whole in the main tree and chunked in the linked tree, rebuilt in
/// order with each fetched chunk decoded after the bytes before it.
@Suite struct LinkedChunkTests {
    /// Publishes `files` with chunks that share history from 16 KiB (none cut on its own).
    @discardableResult
    func publishLinked(_ files: [(String, [UInt8])], version: Int64, repo: TempDir) throws -> PublishResult {
        try publishChunked(files, version: version, repo: repo, threshold: 0, linkThreshold: 16 << 10)
    }

    /// Text with `edits` lines changed, spread over it.
    func edited(_ bytes: [UInt8], edits: Int, seed: UInt64) -> [UInt8] {
        var out = bytes
        for i in 0..<edits {
            let at = (out.count / (edits + 1)) * (i + 1) + Int(seed % 97)
            out.replaceSubrange(at..<(at + 8), with: Array("CHANGED\(i % 10)".utf8))
        }
        return out
    }

    @Test func theSameNewChunkInTwoFilesIsFetchedOnceAndBothAreRebuilt() throws {
        let doc = Pack.text(300 << 10, seed: 3), other = Pack.text(200 << 10, seed: 4)
        let changed = edited(doc, edits: 4, seed: 1)
        /// Version 1, then version 2 with a.json edited and, when `copy`, the same edited text
        /// again as c.json: each new chunk lies in two places, and its compressed bytes there
        /// decode only there. Returns what the update planned to fetch.
        func update(copy: Bool) throws -> UInt64 {
            let repo = TempDir(), data = TempDir()
            defer { repo.cleanup(); data.cleanup() }
            try publishLinked([("a.json", doc), ("b.json", other)], version: 1, repo: repo)
            let c = try Client(dataDir: data.path, bundleDir: nil)
            defer { c.close() }
            try c.set("manifest_url", headURL(repo))
            #expect(try c.update(progress: nil))
            let v2 = try publishLinked([("a.json", changed), ("b.json", other)] + (copy ? [("c.json", changed)] : []),
                                       version: 2, repo: repo)
            #expect(v2.head.index?.linked != nil)
            let preview = try #require(try c.preview())
            let lines = Locked<[String]>([])
            c.setLogger { _, line in lines.withLock { $0.append(line) } }
            #expect(try c.update(progress: nil))
            #expect(!lines.withLock { $0 }.contains { $0.contains("whole archive") }, "\(lines.withLock { $0 })")
            #expect(try FS.readFile(try c.resolve("a.json")) == changed)
            if copy { #expect(try FS.readFile(try c.resolve("c.json")) == changed) }
            let left = try FS.list(data.path + "/downloads").filter { $0.hasSuffix(".chunks") }
            #expect(left.isEmpty, "\(left)")
            return preview.transferBytes
        }
        let once = try update(copy: false), twice = try update(copy: true)
        #expect(once > 0 && once < UInt64(changed.count) / 4, "\(once)")
        // The copy's chunks are decoded once, at a.json's places, and copied at c.json's.
        #expect(twice == once, "\(once) \(twice)")
    }

    /// From the chunk threshold, a text file's chunks share history by default (its own would
    /// cost a sixth more) and those of noise with runs of zeros stay its own; the text file is listed whole
    /// in the main tree, and an edit to it still costs a few chunks.
    @Test func aTextFileFromTheChunkThresholdSharesHistoryByDefaultAndUpdatesByChunk() throws {
        #expect(PublishRequest(source: "s", repo: "r").ownChunkCostLimit == Publisher.defaultOwnChunkCostLimit)
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        // Past the default threshold (4 MiB): hundreds of chunks, several chunk pages.
        let doc = Pack.text(4608 << 10, seed: 11), pack = Pack.mostlyNoise(4400 << 10, seed: 12)
        func publish(_ text: [UInt8], version: Int64) throws -> PublishResult {
            try publishChunked([("doc.json", text), ("pack.bin", pack)], version: version, repo: repo, threshold: Publisher.defaultChunkThreshold,
                               ownChunkCostLimit: Publisher.defaultOwnChunkCostLimit)
        }
        let r = try publish(doc, version: 1)
        let (indexed, lists) = try IndexReader.read(archive: repo.path + "/" + r.archivePath, try #require(r.head.index), source: "test")
        let kinds = Dictionary(uniqueKeysWithValues: indexed.chunked.map { (indexed.files[$0.file].path, $0.linked) })
        #expect(kinds == ["doc.json": true, "pack.bin": false], "\(kinds)")
        #expect((lists["doc.json"]?.count ?? 0) > 300 && (lists["pack.bin"]?.count ?? 0) > 300, "\(lists["doc.json"]?.count ?? 0) \(lists["pack.bin"]?.count ?? 0)")
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        #expect(try c.update(progress: nil))
        let changed = edited(doc, edits: 4, seed: 2)
        try publish(changed, version: 2)
        let preview = try #require(try c.preview())
        let lines = logged(c)
        #expect(try c.update(progress: nil))
        #expect(!lines().contains { $0.contains("whole archive") }, "\(lines())")
        #expect(try FS.readFile(try c.resolve("doc.json"), limit: 8 << 20) == changed)
        #expect(preview.transferBytes > 0 && preview.transferBytes < UInt64(doc.count) / 20, "\(preview.transferBytes)")
    }

    @Test func verifyDecodesEveryLinkedChunkAfterItsHistoryAndFindsAChangedByte() throws {
        let repo = TempDir()
        defer { repo.cleanup() }
        let r = try publishLinked([("a.json", Pack.text(200 << 10, seed: 9))], version: 1, repo: repo)
        let archive = repo.path + "/" + r.archivePath
        let checked = try HeadCheck.verify(r.head, archive: archive, formatOneFiles: r.manifest.files, source: "head.json")
        #expect(checked.chunkedFiles == 1 && checked.chunks > 20, "\(checked)")
        // One byte in the middle of the entry's data: some chunk no longer decodes to its record.
        let location = try #require(r.manifest.files.first { $0.path == "a.json" }?.location)
        let at = location.dataOffset + location.compressedSize / 2
        let f = try File.open(archive, O_RDWR)
        var byte: [UInt8] = [0]
        _ = try byte.withUnsafeMutableBytes { try f.pread(into: $0, at: at) }
        byte[0] ^= 0x55
        try byte.withUnsafeBytes { try f.pwrite($0, at: at) }
        #expect(statusOf { _ = try HeadCheck.verify(r.head, archive: archive, formatOneFiles: r.manifest.files, source: "head.json") } == .integrity)
    }

    /// The rebuild's own path: linked chunks kept compressed (their history was not on disk
    /// when they arrived, as with ranges fetched in parallel) are decoded in order after the
    /// bytes written before them; one that does not decode is dropped and blamed on its source.
    @Test func chunksKeptCompressedAreDecodedByTheRebuildAndABadOneIsBlamedOnItsSource() throws {
        let repo = TempDir(), data = TempDir(), dir = TempDir()
        defer { repo.cleanup(); data.cleanup(); dir.cleanup() }
        let doc = Pack.text(150 << 10, seed: 5)
        let r = try publishLinked([("a.json", doc)], version: 1, repo: repo)
        let archive = repo.path + "/" + r.archivePath
        let index = try #require(r.head.index)
        let (indexed, lists) = try IndexReader.read(archive: archive, index, source: "test")
        let n = try #require(indexed.files.firstIndex { $0.path == "a.json" })
        let file = indexed.files[n]
        let records = try #require(lists["a.json"])
        #expect(indexed.chunked.first { $0.file == n }?.linked == true && records.count > 10)
        let location = try #require(file.location)
        let bytes = try FS.readFile(archive, limit: 64 << 20)
        func stage() throws -> (ChunkedFile, [String: String]) {
            var offset = location.dataOffset, sources: [ChunkOrigin] = [], kept: [String: String] = [:]
            for c in records {
                let key = ChunkPlanner.linkedKey(c.id, offset)
                try dir.write(key, Array(bytes[Int(offset)..<Int(offset + UInt64(c.compressedSize))]))
                kept[key] = dir.path + "/" + key
                sources.append(.linked(offset: offset))
                offset += UInt64(c.compressedSize)
            }
            return (ChunkedFile(file: file, method: 8, linked: true, records: records, sources: sources, localFiles: []), kept)
        }
        let store = try Store(root: data.path)
        let installer = Installer(store: store, maxReleaseBytes: 1 << 30, cancel: CancelToken(),
                                  progress: ProgressReporter(nil, cancel: CancelToken()))
        var (f, kept) = try stage()
        try installer.rebuild(f, to: data.path + "/a.json", chunks: &kept) { _ in }
        #expect(try FS.readFile(data.path + "/a.json", limit: 1 << 20) == doc)
        #expect(try FS.list(dir.path).filter { $0.contains(".") }.isEmpty, "the compressed chunks are dropped once decoded")
        #expect(try FS.list(dir.path).count == records.count, "each kept decoded")
        // Again with the eighth chunk's compressed bytes changed (and no decoded copies).
        for name in try FS.list(dir.path) { try FS.unlink(dir.path + "/" + name) }
        (f, kept) = try stage()
        guard case let .linked(eighth) = f.sources[7] else { Issue.record("not a linked chunk"); return }
        let key = ChunkPlanner.linkedKey(records[7].id, eighth)
        var changed = try FS.readFile(dir.path + "/" + key)
        changed[changed.count / 2] ^= 0x20
        try FS.unlink(dir.path + "/" + key)
        try dir.write(key, changed)
        do {
            try installer.rebuild(f, to: data.path + "/b.json", chunks: &kept) { _ in }
            Issue.record("a changed chunk was decoded")
        } catch let e as DifferentialFallback {
            #expect(e.badBytes, "\(e.message)")
        }
        #expect(!FS.exists(dir.path + "/" + key), "the bad chunk is dropped")
    }

    /// Chunked files of the main tree and of the linked tree, interleaved in path order, come
    /// out in file order with their own pages and chunks, the linked ones marked.
    @Test func mainAndLinkedChunkedFilesInterleaveInFileOrder() throws {
        func chunks(_ seed: UInt8, _ n: Int) -> [ChunkRecord] {
            (0..<n).map { ChunkRecord(sha256: Array(repeating: seed &+ UInt8($0), count: 32), size: 4096, compressedSize: 50) }
        }
        var offset: UInt64 = 0
        func file(_ path: String, _ chunks: [ChunkRecord], size: UInt64 = 0) -> (file: ManifestFile, chunks: [ChunkRecord]) {
            let total = chunks.isEmpty ? size : chunks.reduce(0) { $0 + UInt64($1.size) }
            let stored = chunks.isEmpty ? size : chunks.reduce(0) { $0 + UInt64($1.compressedSize) }
            defer { offset += 30 + UInt64(path.utf8.count) + stored }
            return (ManifestFile(path: path, size: total, sha256: String(repeating: "cd", count: 32),
                                 location: ArchiveLocation(headerOffset: offset, dataOffset: offset + 30 + UInt64(path.utf8.count),
                                                           compressedSize: stored, method: chunks.isEmpty ? 0 : 8)), chunks)
        }
        let files = [file("a.bin", chunks(10, 3)), file("b.json", chunks(20, 2)), file("c", [], size: 7),
                     file("d.bin", chunks(30, 4)), file("e.json", chunks(40, 5)), file("f.bin", chunks(50, 2))]
        let built = try IndexBuilder.build(files) { [1, 4].contains($0) }
        let linked = try #require(built.linked)
        let index = IndexLocation(offset: 500, size: UInt64(built.bytes.count), root: built.root, chunkSize: 4096,
                                  linked: LinkedIndex(offset: 500 + linked.offset, root: linked.root))
        let (read, lists) = try IndexReader.walk(index, source: "test", strict: true) { refs in
            try refs.map { ref, at in
                let start = Int(at - 500)
                return try IndexPage.unseal(Array(built.bytes[start..<(start + Int(ref.compressedSize))]), ref, source: "test")
            }
        }
        #expect(read.files == files.map(\.file))
        #expect(read.chunked.map(\.file) == [0, 1, 3, 4, 5])
        #expect(read.chunked.map(\.linked) == [false, true, false, true, false])
        for c in read.chunked { #expect(lists[files[c.file].file.path] == files[c.file].chunks) }
        #expect(lists.count == 5)
    }

    @Test func aLinkedTreeThatDisagreesWithTheMainTreeIsRefusedAndItsFilesReadWhole() throws {
        let file = ManifestFile(path: "a.json", size: 8192, sha256: String(repeating: "ab", count: 32),
                                location: ArchiveLocation(headerOffset: 0, dataOffset: 36, compressedSize: 100, method: 8))
        let chunks = [ChunkRecord(sha256: Array(repeating: 1, count: 32), size: 4096, compressedSize: 60),
                      ChunkRecord(sha256: Array(repeating: 2, count: 32), size: 4096, compressedSize: 40)]
        let good = try IndexBuilder.build([(file, chunks)]) { _ in true }
        let linked = try #require(good.linked)
        var refusals: [String] = []
        func walk(_ built: IndexBuilder.Built, linkedRoot: PageRef, at: UInt64, strict: Bool = true) throws -> IndexedFiles {
            let index = IndexLocation(offset: 1000, size: UInt64(built.bytes.count), root: built.root, chunkSize: 4096,
                                      linked: LinkedIndex(offset: 1000 + at, root: linkedRoot))
            return try IndexReader.walk(index, source: "test", strict: strict, refused: { refusals.append($0) }) { refs in
                try refs.map { ref, offset in
                    let start = Int(offset - 1000)
                    return try IndexPage.unseal(Array(built.bytes[start..<(start + Int(ref.compressedSize))]), ref, source: "test")
                }
            }.files
        }
        let files = try walk(good, linkedRoot: linked.root, at: linked.offset)
        #expect(files.files == [file] && files.chunked.count == 1 && files.chunked[0].file == 0 && files.chunked[0].linked
                && files.chunked[0].pages.count == 1)
        // The main tree lists the file with another size than the linked tree's: refused.
        var other = file
        other.size = 8193
        let main = try IndexBuilder.build([(other, [])])
        let second = try IndexBuilder.build([(file, chunks)]) { _ in true }
        let mixed = IndexBuilder.Built(root: main.root, bytes: main.bytes + Array(second.bytes[Int(second.linked!.offset)...]), pages: 0)
        #expect(statusOf { _ = try walk(mixed, linkedRoot: linked.root, at: UInt64(main.bytes.count)) } == .manifest)
        // The linked root placed over the main tree's pages: refused.
        #expect(statusOf { _ = try walk(good, linkedRoot: good.root, at: 0) } == .manifest)
        // A client (not strict) reads such a release's files whole: the main tree is complete.
        let whole = try walk(mixed, linkedRoot: linked.root, at: UInt64(main.bytes.count), strict: false)
        #expect(whole.files.count == 1 && whole.chunked.isEmpty && whole.files[0].size == 8193)
        #expect(refusals.count == 1 && refusals[0].contains("fetched whole"), "\(refusals)")
    }
}
