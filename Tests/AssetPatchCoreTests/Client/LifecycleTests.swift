import Glibc
import Testing
@testable import AssetPatchCore

@Suite struct LifecycleTests {
    func release(_ v: Int64) -> [(String, [UInt8])] {
        [("v.txt", Array("version \(v)".utf8)), ("shared.bin", noise(3000, seed: 1))]
    }

    func served(_ c: Client) throws -> String? {
        do { return String(decoding: try FS.readFile(try c.resolve("v.txt")), as: UTF8.self) } catch let e as AssetPatchError where e.status == .notFound {
            return nil
        }
    }

    @Test func rollbackGoesBackReleaseByReleaseToTheBundleAndUpdatesSkipTheBadVersions() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        try c.set("keep_versions", "2")
        for v in Int64(1)...3 {
            try c.set("manifest_url", try publishRelease(release(v), version: v, repo: repo))
            #expect(try c.update(progress: nil))
        }
        let v3Path = try c.resolve("v.txt")
        #expect(try c.rollback() == 2 && served(c) == "version 2")
        #expect(try FS.readFile(v3Path) == Array("version 3".utf8), "a path handed out from the release left stays valid this session")
        #expect(try c.rollback() == 1 && served(c) == "version 1")
        #expect(try c.rollback() == 0 && served(c) == nil && c.currentVersion == 0)
        #expect(statusOf { _ = try c.rollback() } == .state)
        let s = try c.state()
        #expect(s.bad.sorted() == [1, 2, 3] && s.lastRollback?.from == 1 && s.lastRollback?.to == 0)
        // Version 3 is still what the repository offers: bad, so no update.
        #expect(try c.update(progress: nil) == false && c.currentVersion == 0)
        // A newer version is taken.
        try c.set("manifest_url", try publishRelease(release(4), version: 4, repo: repo))
        #expect(try c.update(progress: nil) && served(c) == "version 4")
        // The next open removes what the rollbacks left behind.
        _ = try Client(dataDir: data.path, bundleDir: nil, countsLaunch: false)
        #expect(try FS.list(data.path + "/releases").count == 1)
    }

    @Test func opensWithoutMarkGoodRollBackAfterMaxFailedLaunches() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let first = try Client(dataDir: data.path, bundleDir: nil)
        try first.set("max_failed_launches", "2")
        try first.set("manifest_url", try publishRelease(release(1), version: 1, repo: repo))
        #expect(try first.update(progress: nil))
        try first.set("manifest_url", try publishRelease(release(2), version: 2, repo: repo))
        #expect(try first.update(progress: nil))
        #expect(try first.state().launches == 0, "the session that activated does not count")
        first.close()
        // Version 1 was never marked good either, but it is the kept release to go back to.
        for n in 1...2 {
            let c = try Client(dataDir: data.path, bundleDir: nil)
            #expect(try c.state().launches == n && c.currentVersion == 2)
        }
        let third = try Client(dataDir: data.path, bundleDir: nil)
        #expect(try served(third) == "version 1" && third.currentVersion == 1)
        let s = try third.state()
        #expect(s.bad == [2] && s.lastRollback?.reason.contains("crash loop") == true && s.maxFailedLaunches == 2)
        // The open's rollback reaches the first logger installed.
        let logged = LogLines()
        third.setLogger { _, m in logged.add(m) }
        #expect(logged.lines.count == 1 && logged.lines[0].contains("rolled back from version 2 to version 1"))
        // Marked good, a release is never rolled back automatically.
        try third.markGood()
        for _ in 0..<4 { #expect(try Client(dataDir: data.path, bundleDir: nil).currentVersion == 1) }
        #expect(try third.state().launches == 0 && third.state().activeIsGood)
    }

    @Test func theOpenThatActivatesANextOpenReleaseCountsAsTheFirstLaunch() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        try c.set("apply", "next_open")
        try c.set("max_failed_launches", "1")
        try c.set("manifest_url", try publishRelease(release(1), version: 1, repo: repo))
        #expect(try c.update(progress: nil) && c.currentVersion == 0)
        let activating = try Client(dataDir: data.path, bundleDir: nil)
        #expect(try activating.state().launches == 1 && activating.currentVersion == 1)
        let next = try Client(dataDir: data.path, bundleDir: nil)
        #expect(next.currentVersion == 0, "the second launch exceeds 1: back to the bundle")
    }

    @Test func concurrentOpensNeverLoseALaunch() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        try c.set("max_failed_launches", "1000")
        try c.set("manifest_url", try publishRelease(release(1), version: 1, repo: repo))
        #expect(try c.update(progress: nil))
        let failures = ResolveFailures()
        var threads: [pthread_t] = []
        let path = data.path
        for _ in 0..<8 {
            threads.append(try startThread {
                for _ in 0..<20 where (try? Client(dataDir: path, bundleDir: nil)) == nil { failures.add() }
            })
        }
        for t in threads { pthread_join(t, nil) }
        #expect(failures.count == 0)
        #expect(try c.state().launches == 160)
    }

    @Test func aSuccessfulUpdateDropsSupersededDownloadsAndReleasesBeyondKeepVersions() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        try c.set("keep_versions", "1")
        try c.set("manifest_url", try publishRelease(release(1), version: 1, repo: repo))
        #expect(try c.update(progress: nil))
        // A partial archive and fetched files of some superseded release.
        let stale = String(repeating: "e", count: 64)
        try FS.makeDirectories(data.path + "/downloads/\(stale).files")
        try FS.writeAtomically(data.path + "/downloads/\(stale).part", noise(1000))
        try FS.writeAtomically(data.path + "/downloads/\(stale).files/" + String(repeating: "f", count: 64), noise(10))
        #expect(c.store.usage().downloads > 0)
        for v in Int64(2)...3 {
            try c.set("manifest_url", try publishRelease(release(v), version: v, repo: repo))
            #expect(try c.update(progress: nil))
        }
        #expect(try FS.list(data.path + "/downloads").isEmpty)
        #expect(try FS.list(data.path + "/releases").sorted() == [c.state().active!.id, c.state().kept[0].id].sorted())
        #expect(try c.state().kept.map(\.version) == [2])
    }

    @Test func notesAndMandatoryTravelFromTheManifestToTheCandidateAndTheRelease() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        try c.set("manifest_url", try publishRelease(release(1), version: 1, repo: repo) { pairs in
            pairs.append(("notes", .string("Neue Level ❄")))
            pairs.append(("mandatory", .bool(true)))
            pairs.append(("label", .string("winter")))
        })
        #expect(try c.release(.candidate) == nil && c.release(.active) == nil)
        _ = try c.check()
        let candidate = try #require(try c.release(.candidate))
        #expect(candidate.version == 1 && candidate.notes == "Neue Level ❄" && candidate.mandatory && candidate.label == "winter")
        #expect(try c.update(progress: nil))
        let active = try #require(try c.release(.active))
        #expect(active.notes == "Neue Level ❄" && active.mandatory && !active.markedGood)
        try c.markGood()
        #expect(try c.release(.active)?.markedGood == true)
        // Wrong types and oversized notes are the manifest's fault.
        try c.set("manifest_url", try publishRelease(release(2), version: 2, repo: repo) { $0.append(("mandatory", .string("yes"))) })
        #expect(statusOf { _ = try c.check() } == .manifest)
        try c.set("manifest_url", try publishRelease(release(2), version: 2, repo: repo) {
            $0.append(("notes", .string(String(repeating: "x", count: 65537))))
        })
        #expect(statusOf { _ = try c.check() } == .manifest)
    }

    @Test func resetDropsEveryReleaseButKeepsTheDowngradeMark() throws {
        let repo = TempDir(), data = TempDir(), old = TempDir()
        defer { repo.cleanup(); data.cleanup(); old.cleanup() }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        let oldURL = try publishRelease(release(1), version: 1, repo: old)
        try c.set("manifest_url", try publishRelease(release(1), version: 1, repo: repo))
        #expect(try c.update(progress: nil))
        try c.set("manifest_url", try publishRelease(release(2), version: 2, repo: repo))
        #expect(try c.update(progress: nil))
        _ = try c.rollback()
        try c.reset()
        let s = try c.state()
        #expect(c.currentVersion == 0 && s.active == nil && s.kept.isEmpty && s.bad.isEmpty)
        #expect(s.highestVersion == 2 && s.pin?.name == "test")
        #expect(try FS.list(data.path + "/releases").isEmpty && FS.list(data.path + "/downloads").isEmpty)
        try c.set("manifest_url", oldURL)
        #expect(try c.update(progress: nil) == false && c.lastCheck?.reason == .older && c.currentVersion == 0)
        try c.set("manifest_url", URLs.fileURL(forPath: repo.path + "/manifest.json"))
        #expect(try c.update(progress: nil) && served(c) == "version 2", "the newest release, no longer bad")
        #expect(statusOf { try c.markGood() } == nil)
        #expect(try c.state().activeIsGood)
    }
}

@Suite struct AppUpgradeTests {
    func files(_ text: String) -> [(String, [UInt8])] { [("level.txt", Array(text.utf8))] }

    func read(_ c: Client) throws -> String { String(decoding: try FS.readFile(try c.resolve("level.txt")), as: UTF8.self) }

    @Test func aBundleCarryingANewerReleaseEndsTheStaleOverlay() throws {
        let repo = TempDir(), data = TempDir(), bundle = TempDir()
        defer { repo.cleanup(); data.cleanup(); bundle.cleanup() }
        try bundle.write("level.txt", "shipped with app 1.0")
        let c = try Client(dataDir: data.path, bundleDir: bundle.path)
        try c.set("manifest_url", try publishRelease(files("hot update 2"), version: 2, repo: repo))
        #expect(try c.update(progress: nil) && read(c) == "hot update 2")
        c.close()
        // The app-store upgrade ships release 3's resources in its bundle, stamped.
        try bundle.write("level.txt", "shipped with app 2.0")
        try BundleMarker.write(bundle.path, package: "test", version: 3)
        let upgraded = try Client(dataDir: data.path, bundleDir: bundle.path)
        #expect(try read(upgraded) == "shipped with app 2.0" && upgraded.currentVersion == 0)
        let s = try upgraded.state()
        #expect(s.bundleVersion == 3 && s.lastRollback?.reason.contains("app upgrade") == true && s.bad.isEmpty)
        let logged = LogLines()
        upgraded.setLogger { _, m in logged.add(m) }
        #expect(logged.lines.contains { $0.contains("stopped serving version 2") })
        // Release 3 is what the bundle has: nothing to install. Release 4 is taken.
        try upgraded.set("manifest_url", try publishRelease(files("hot update 3"), version: 3, repo: repo))
        #expect(try upgraded.update(progress: nil) == false)
        try upgraded.set("manifest_url", try publishRelease(files("hot update 4"), version: 4, repo: repo))
        #expect(try upgraded.update(progress: nil) && read(upgraded) == "hot update 4")
        // An app upgrade to another package: its releases go, with the marks of the old one.
        try BundleMarker.write(bundle.path, package: "other", version: 9)
        let other = try Client(dataDir: data.path, bundleDir: bundle.path)
        let o = try other.state()
        #expect(o.bundleVersion == 9 && other.currentVersion == 0 && o.pin == PackagePin(name: "other", source: .bundle))
        #expect(o.highestVersion == 0 && o.kept.isEmpty)
    }

    @Test func anAppOutsideARelease_sAppVersionsStopsServingIt() throws {
        let repo = TempDir(), data = TempDir(), bundle = TempDir()
        defer { repo.cleanup(); data.cleanup(); bundle.cleanup() }
        try bundle.write("level.txt", "bundle")
        let c = try Client(dataDir: data.path, bundleDir: bundle.path)
        try c.set("app_version", "1.2")
        try c.set("keep_versions", "2")
        try c.set("manifest_url", try publishRelease(files("for any app"), version: 1, repo: repo))
        #expect(try c.update(progress: nil))
        try c.set("manifest_url", try publishRelease(files("for app 1.x"), version: 2, repo: repo) {
            $0.append(("max_app_version", .string("1.9")))
        })
        #expect(try c.update(progress: nil) && read(c) == "for app 1.x")
        c.close()
        let upgraded = try Client(dataDir: data.path, bundleDir: bundle.path)
        #expect(try read(upgraded) == "for app 1.x", "the open alone does not know the app's version")
        try upgraded.set("app_version", "2.0")
        #expect(try read(upgraded) == "for any app" && upgraded.currentVersion == 1, "the newest kept release that fits")
        #expect(try upgraded.state().lastRollback?.reason.contains("app version 2.0") == true)
        // And the release built for 1.x is refused by updates of app 2.0.
        try upgraded.set("manifest_url", try publishRelease(files("for app 1.x, again"), version: 3, repo: repo) {
            $0.append(("max_app_version", .string("1.9")))
        })
        #expect(statusOf { _ = try upgraded.update(progress: nil) } == .incompatible)
    }
}
