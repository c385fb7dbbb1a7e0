import Glibc
import Testing
@testable import AssetPatchCore

/// Two clients on one data directory: what one serves is one release, and stays on disk while
/// it serves it, whatever the other installs, rolls back or resets.
@Suite struct ServedReleaseTests {
    func files(_ text: String) -> [(String, [UInt8])] {
        [("level.txt", Array(text.utf8)), ("sub/data.bin", noise(30_000, seed: UInt64(text.utf8.count)))]
    }

    func read(_ c: Client) throws -> String { String(decoding: try FS.readFile(try c.resolve("level.txt")), as: UTF8.self) }

    @Test func aClientSpeaksOfTheReleaseItServesWhileAnotherUpdates() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let a = try Client(dataDir: data.path, bundleDir: nil)
        defer { a.close() }
        try a.set("manifest_url", try publishRelease(files("one"), version: 1, repo: repo))
        #expect(try a.update(progress: nil))
        let paths = [try a.resolve("level.txt"), try a.resolve("sub/data.bin")]

        let b = try Client(dataDir: data.path, bundleDir: nil)
        defer { b.close() }
        try b.set("manifest_url", try publishRelease(files("two"), version: 2, repo: repo))
        #expect(try b.update(progress: nil) && read(b) == "two")

        // A still serves release 1, and everything it says is of release 1.
        #expect(try read(a) == "one" && a.currentVersion == 1)
        #expect(try a.release(.active)?.version == 1)
        try a.markGood()
        let s = try a.state()
        #expect(s.active?.version == 2 && s.good.contains { $0.hasPrefix("1-") } && !s.activeIsGood)

        // B installs release 3 (release 1 leaves the kept list) and resets: release 1's files
        // stay while A serves them.
        try b.set("manifest_url", try publishRelease(files("three"), version: 3, repo: repo))
        #expect(try b.update(progress: nil) && read(b) == "three")
        try b.reset()
        #expect(b.currentVersion == 0)
        for p in paths { #expect(FS.isRegularFile(p), "\(p) was deleted while client A serves it") }
        #expect(try read(a) == "one" && a.currentVersion == 1)
        #expect(statusOf { try a.markGood() } == .state, "release 1 is no longer installed: nothing to confirm")

        // Once A closes, the next clean-up (here an open's) removes it.
        a.close()
        let c = try Client(dataDir: data.path, bundleDir: nil)
        c.close()
        #expect(!FS.exists(paths[0]))
    }

    @Test func aReleaseIsDeletedOnceNoClientServesIt() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        var path = ""
        do {
            let a = try Client(dataDir: data.path, bundleDir: nil)
            try a.set("manifest_url", try publishRelease(files("one"), version: 1, repo: repo))
            #expect(try a.update(progress: nil))
            path = try a.resolve("level.txt")
            let b = try Client(dataDir: data.path, bundleDir: nil)
            try b.set("keep_versions", "0")
            try b.set("manifest_url", try publishRelease(files("two"), version: 2, repo: repo))
            #expect(try b.update(progress: nil))
            #expect(FS.isRegularFile(path), "client A still serves release 1")
            a.close()
            b.close()
        }
        // Both clients are gone: the next open's clean-up takes release 1.
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        #expect(!FS.exists(path) && c.currentVersion == 2)
    }

    /// With keep_versions=0 a client's own update deletes the release it served before, right
    /// after it switches (its own lease no longer holds it).
    @Test func aClientsOwnUpdateFreesWhatItServedBefore() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let a = try Client(dataDir: data.path, bundleDir: nil)
        defer { a.close() }
        try a.set("keep_versions", "0")
        try a.set("manifest_url", try publishRelease(files("one"), version: 1, repo: repo))
        #expect(try a.update(progress: nil))
        let old = try a.resolve("level.txt")
        try a.set("manifest_url", try publishRelease(files("two"), version: 2, repo: repo))
        #expect(try a.update(progress: nil) && read(a) == "two")
        #expect(!FS.exists(old))
    }
}
