import Glibc
import Testing
@testable import AssetPatchCore

/// Files made durable behind an update or a group's fetch (`SyncBehind`) are not synced again
/// at its end: the seal, and the group's own sync, take only what was not (the release record,
/// the names file, directories), and every file still resolves to its published bytes.
@Suite struct SyncedBehindTests {
    /// Twenty small files and a pack whose second half repeats its first (a chunked file
    /// worth rebuilding even on a first fetch: half its chunks are taken twice).
    static func release(_ version: Int, prefix: String = "") -> [(String, [UInt8])] {
        var files: [(String, [UInt8])] = (0..<20).map { i in
            ("\(prefix)small/\(i).txt", Array("file \(i) of release \(i < 10 ? version : 1)\n".utf8))
        }
        var pack = Pack(count: 120, seed: 11)
        if version > 1 { pack.records[30] = noise(pack.records[30].count, seed: 99) }
        files.append(("\(prefix)data/pack.bin", pack.bytes + pack.bytes))
        return files
    }

    @Test func theSealSyncsOnlyWhatTheUpdateDidNotSyncBehind() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup(); FaultInjection.clear() }
        try publishChunked(SyncedBehindTests.release(1), version: 1, repo: repo)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        #expect(try c.update(progress: nil))
        let v2 = SyncedBehindTests.release(2)
        try publishChunked(v2, version: 2, repo: repo)
        let lines = logged(c)

        FaultInjection.recordSyncs()
        #expect(try c.update(progress: nil))
        let seal = try #require(FaultInjection.recordedSyncs().last { $0.files.contains { $0.hasSuffix("/" + Store.recordName) } })
        #expect(lines().contains { $0.hasPrefix("differential update:") }, "\(lines())")
        // Ten small files fetched and the pack rebuilt: all synced behind; the others linked.
        let files = seal.files.filter { path in v2.contains { path.hasSuffix("/" + $0.0) } }
        #expect(files.isEmpty, "synced again by the seal: \(files)")
        #expect(!seal.directories.isEmpty)
        for (path, bytes) in v2 { #expect(try FS.readFile(try c.resolve(path)) == bytes, "\(path)") }
    }

    @Test func aGroupsFetchSyncsOnlyWhatItDidNotSyncBehind() throws {
        let repo = TempDir(), data = TempDir(), staging = TempDir()
        defer { repo.cleanup(); data.cleanup(); staging.cleanup(); FaultInjection.clear() }
        let files = [("readme.txt", Array("one".utf8))] + SyncedBehindTests.release(1, prefix: "extra/")
        for (p, b) in files { try staging.write(p, b) }
        var request = PublishRequest(source: staging.path, repo: repo.path)
        request.package = "test"
        request.version = 1
        request.chunkThreshold = 64 << 10
        request.chunkSize = 4096
        request.deltaReleases = 0
        request.groups = [GroupRule(name: "extra", delivery: .onDemand, patterns: ["extra/*"])]
        _ = try Publisher.publish(request)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", headURL(repo))
        #expect(try c.update(progress: nil))
        let lines = logged(c)

        FaultInjection.recordSyncs()
        _ = try c.fetchGroups(["extra"], progress: nil)
        let syncs = FaultInjection.recordedSyncs()
        // "fetching group extra of version 1: N files and chunks in M ranges": more entries
        // than the group's 21 files, so the pack came as chunks and was rebuilt.
        let fetching = try #require(lines().first { $0.hasPrefix("fetching group extra") })
        let entries = fetching.split(separator: ":").last.flatMap { Int($0.split(separator: " ").first ?? "") }
        #expect((entries ?? 0) > 21, "\(fetching)")
        // One call: the group's files, all synced as they were kept or rebuilt, and its directories.
        #expect(syncs.count == 1)
        #expect(syncs.first?.files == [], "synced again at the end: \(syncs.first?.files ?? [])")
        #expect(syncs.first?.directories.isEmpty == false)
        for (path, bytes) in files { #expect(try FS.readFile(try c.resolve(path)) == bytes, "\(path)") }
    }
}
