import Glibc
import Testing
@testable import AssetPatchCore

/// The update pipeline through `Client` over file:// repositories.
@Suite struct ClientTests {
    let v1: [(String, [UInt8])] = [("readme.txt", Array("one".utf8)), ("img/logo@2x.png", noise(50_000)), ("data/a.json", Array("{}".utf8))]
    let v2: [(String, [UInt8])] = [("readme.txt", Array("two".utf8)), ("img/logo@2x.png", noise(60_000, seed: 7)), ("img/logo.png", noise(10_000, seed: 9))]

    @Test func updatesResolvesAndKeepsTheOldReleaseOnFailure() throws {
        let repo = TempDir(), data = TempDir(), bundle = TempDir()
        defer { repo.cleanup(); data.cleanup(); bundle.cleanup() }
        try bundle.write("readme.txt", "bundle")
        try bundle.write("only/bundle.txt", "b")
        let url = try publishRelease(v1, version: 1, repo: repo)

        let c = try Client(dataDir: data.path, bundleDir: bundle.path)
        defer { c.close() }
        #expect(try FS.readFile(try c.resolve("readme.txt")) == Array("bundle".utf8))
        try c.set("manifest_url", url)
        try c.set("variants", "@2x,")
        var phases: [Phase] = []
        #expect(try c.update { p in
            if phases.last != p.phase { phases.append(p.phase) }
            return false
        })
        #expect(phases == [.check, .download, .install, .activate, .done])
        #expect(c.currentVersion == 1)
        #expect(try FS.readFile(try c.resolve("readme.txt")) == Array("one".utf8))
        #expect(try FS.readFile(try c.resolve("img/logo.png")) == v1[1].1)
        #expect(try FS.readFile(try c.resolve("only/bundle.txt")) == Array("b".utf8))
        #expect(statusOf { _ = try c.resolve("nope") } == .notFound)
        #expect(statusOf { _ = try c.resolve("../etc/passwd") } == .argument)
        #expect(try c.update(progress: nil) == false)

        // A release whose archive no longer matches: refused, v1 still served.
        try publishRelease(v2, version: 2, repo: repo) { pairs in
            for i in pairs.indices where pairs[i].0 == "files" {
                if case var .array(items) = pairs[i].1, case var .object(f) = items[0] {
                    f[2].1 = .string(String(repeating: "0", count: 64))
                    items[0] = .object(f)
                    pairs[i].1 = .array(items)
                }
            }
        }
        #expect(statusOf { _ = try c.update(progress: nil) } == .integrity)
        #expect(c.currentVersion == 1)
        #expect(try FS.readFile(try c.resolve("readme.txt")) == Array("one".utf8))
        #expect(try FS.list(c.store.stagingRoot).isEmpty)

        try publishRelease(v2, version: 2, repo: repo)
        let oldPath = try c.resolve("readme.txt")
        #expect(try c.update(progress: nil))
        #expect(c.currentVersion == 2)
        #expect(try FS.readFile(try c.resolve("img/logo.png")) == v2[1].1)  // @2x preferred
        try c.set("variants", "")
        #expect(try FS.readFile(try c.resolve("img/logo.png")) == v2[2].1)
        #expect(statusOf { _ = try c.resolve("data/a.json") } == .notFound)  // dropped in v2, not in the bundle
        #expect(try FS.readFile(oldPath) == Array("one".utf8))  // kept: keep_versions=1
    }

    /// Every on/off option takes one set of spellings, whatever the case; "differential" also
    /// takes "auto". Anything else is an argument error that leaves the option as it was.
    @Test func everyBooleanOptionTakesOneSetOfSpellings() throws {
        var config = ClientConfig()
        for (value, on) in [("1", true), ("TRUE", true), ("yes", true), ("On", true), ("0", false), ("false", false), ("No", false), ("off", false)] {
            try config.set("allow_unsigned_plugins", value)
            try config.set("tcp_quickack", value)
            try config.set("differential", value)
            #expect(config.allowUnsignedPlugins == on && config.http.quickAck == on && config.differential == on, "\(value)")
        }
        try config.set("differential", "auto")
        #expect(config.differential)
        for option in ["allow_unsigned_plugins", "tcp_quickack", "differential"] {
            for bad in ["", "2", "maybe", " 1", "auto "] {
                #expect(statusOf { try config.set(option, bad) } == .argument, "\(option)=\"\(bad)\"")
            }
        }
        #expect(config.differential && config.allowUnsignedPlugins == false)
    }

    @Test func unchangedFilesAreHardLinkedFromTheInstalledRelease() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        func inode(_ path: String) -> UInt64? {
            var st = stat()
            return lstat(path, &st) == 0 ? UInt64(st.st_ino) : nil
        }
        let shared = noise(40_000, seed: 1), kept = noise(30_000, seed: 2)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        try c.set("manifest_url", try publishRelease([("same.bin", shared), ("also.bin", kept), ("v.txt", Array("one".utf8))], version: 1, repo: repo))
        #expect(try c.update(progress: nil))
        let v1Same = try c.resolve("same.bin"), v1Also = try c.resolve("also.bin")
        // A file of the installed release that is no longer read-only is not trusted: extracted.
        #expect(chmod(v1Also, 0o644) == 0)
        try c.set("manifest_url", try publishRelease([("same.bin", shared), ("also.bin", kept), ("v.txt", Array("two".utf8))], version: 2, repo: repo))
        #expect(try c.update(progress: nil))
        let v2Same = try c.resolve("same.bin"), v2Also = try c.resolve("also.bin")
        #expect(v2Same != v1Same && inode(v2Same) == inode(v1Same), "linked, not extracted again")
        #expect(inode(v2Also) != inode(v1Also), "a writable file is extracted instead")
        #expect(try FS.readFile(v2Same) == shared && FS.readFile(v2Also) == kept)
        #expect(try FS.readFile(try c.resolve("v.txt")) == Array("two".utf8))
    }

    @Test func zipLocationsAreCheckedAgainstTheArchiveAndOptional() throws {
        let repo = TempDir(), data = TempDir(), data2 = TempDir()
        defer { repo.cleanup(); data.cleanup(); data2.cleanup() }
        let files: [(String, [UInt8])] = [("a.txt", Array("alpha".utf8)), ("b.bin", noise(5000))]
        // A manifest without locations still installs (the full download).
        var url = try publishRelease(files, version: 1, repo: repo, locations: false)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        try c.set("manifest_url", url)
        #expect(try c.update(progress: nil))
        // A location that disagrees with the archive's own headers is the manifest's fault.
        // The first file's location one byte off: still well-formed, no longer true.
        url = try publishRelease(files, version: 2, repo: repo) { shiftLocation(&$0, file: 0) }
        let c2 = try Client(dataDir: data2.path, bundleDir: nil)
        try c2.set("manifest_url", url)
        #expect(statusOf { _ = try c2.update(progress: nil) } == .manifest)
        #expect(c2.currentVersion == 0)
    }

    @Test func downgradeExpiryAndAppVersionGates() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", try publishRelease(v1, version: 5, repo: repo))
        #expect(try c.update(progress: nil))
        // An older manifest (a stale cache edge, a replay) installs nothing and is no update,
        // with the reason kept for the host.
        try publishRelease(v2, version: 4, repo: repo)
        #expect(try c.check() == nil)
        #expect(c.lastCheck == CheckOutcome(status: .noUpdate, reason: .older, manifestVersion: 4, acceptedVersion: 5, channel: "stable"))
        #expect(try c.update(progress: nil) == false && c.currentVersion == 5)
        #expect(c.lastCheck?.reason == .older)
        #expect(try c.state().highestVersion == 5)
        try publishRelease(v2, version: 6, repo: repo) { $0.append(("expires", .string("2001-01-01T00:00:00Z"))) }
        #expect(statusOf { _ = try c.update(progress: nil) } == .expired)
        #expect(c.lastCheck == CheckOutcome(status: .expired, reason: nil, manifestVersion: 6, acceptedVersion: 5, channel: "stable"))
        try publishRelease(v2, version: 7, repo: repo) { $0.append(("min_app_version", .string("2.10"))) }
        try c.set("app_version", "2.9.9")
        #expect(statusOf { _ = try c.update(progress: nil) } == .incompatible)
        try c.set("app_version", "2.10.0")
        #expect(try c.update(progress: nil))
        #expect(c.currentVersion == 7)
        // The downgrade mark survives a new client.
        let c2 = try Client(dataDir: data.path, bundleDir: nil)
        defer { c2.close() }
        try publishRelease(v1, version: 6, repo: repo)
        try c2.set("manifest_url", URLs.fileURL(forPath: repo.path + "/manifest.json"))
        #expect(c2.lastCheck == nil)
        #expect(try c2.check() == nil && c2.lastCheck?.reason == .older)
        // Another package is refused.
        try publishRelease(v1, version: 8, repo: repo, package: "other")
        #expect(statusOf { _ = try c2.check() } == .manifest)
    }

    @Test func signedReleasesNeedATrustedKey() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let (seed, pub) = try Ed25519.generate()
        let (_, other) = try Ed25519.generate()
        let url = try publishRelease(v1, version: 1, repo: repo, seed: seed)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", url)
        try c.set("public_keys", Base64.encode(other))
        #expect(statusOf { _ = try c.update(progress: nil) } == .signature)
        try c.set("public_keys", Base64.encode(other) + "," + Base64.encode(pub))
        #expect(try c.update(progress: nil))
        #expect(try c.store.loadRelease(try c.store.loadState().active!.id).signatureVerified)
    }

    @Test func nextOpenActivatesOnTheNextClient() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let url = try publishRelease(v1, version: 1, repo: repo)
        do {
            let c = try Client(dataDir: data.path, bundleDir: nil)
            defer { c.close() }
            try c.set("manifest_url", url)
            try c.set("apply", "next_open")
            #expect(try c.update(progress: nil))
            #expect(c.currentVersion == 0)
            #expect(try c.update(progress: nil) == false)  // pending already
        }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        #expect(c.currentVersion == 1)
        #expect(try FS.readFile(try c.resolve("readme.txt")) == Array("one".utf8))
    }

    @Test func openRemovesStagingAndUnreferencedReleases() throws {
        let data = TempDir()
        defer { data.cleanup() }
        do { _ = try Client(dataDir: data.path, bundleDir: nil) }
        try data.write("staging/9-abc/files/x", "half")
        try data.write("releases/9-abc/files/x", "orphan")
        try data.write("downloads/abc.part", "keep me")
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        #expect(try FS.list(data.path + "/staging").isEmpty)
        #expect(try FS.list(data.path + "/releases").isEmpty)
        #expect(try data.read("downloads/abc.part") == Array("keep me".utf8))
    }

    @Test func failedSyncIsRedoneFromScratchNotRetriedInPlace() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup(); FaultInjection.clear() }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", try publishRelease(v1, version: 1, repo: repo))
        for op in ["fdatasync", "fsync", "rename"] {
            FaultInjection.fail(op, errno: EIO)
            #expect(statusOf { _ = try c.update(progress: nil) } == .io, "\(op)")
            FaultInjection.clear()
            #expect(c.currentVersion == 0)
            #expect(try FS.list(data.path + "/staging").isEmpty, "staging removed after a failed \(op)")
        }
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("readme.txt")) == Array("one".utf8))
    }

    @Test func corruptStateIsAnIOError() throws {
        let data = TempDir()
        defer { data.cleanup() }
        try data.write("state.json", "{not json")
        #expect(statusOf { _ = try Client(dataDir: data.path, bundleDir: nil) } == .io)
    }

    @Test func resolvesFromManyThreadsWhileUpdating() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        var files: [(String, [UInt8])] = []
        for i in 0..<300 { files.append(("f/\(i).txt", Array("v1-\(i)".utf8))) }
        let url = try publishRelease(files, version: 1, repo: repo)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", url)
        #expect(try c.update(progress: nil))
        try publishRelease(files.map { ($0.0, Array(("v2" + $0.0).utf8)) }, version: 2, repo: repo)
        try c.startUpdate(progress: nil)
        var threads: [pthread_t] = []
        let failures = ResolveFailures()
        for t in 0..<4 {
            threads.append(try startThread {
                for i in 0..<20_000 {
                    let n = (i * 7 + t) % 300
                    guard let p = try? c.resolve("f/\(n).txt"), let bytes = try? FS.readFile(p) else { failures.add(); continue }
                    let s = String(decoding: bytes, as: UTF8.self)
                    if s != "v1-\(n)" && s != "v2f/\(n).txt" { failures.add() }
                }
            })
        }
        for t in threads { pthread_join(t, nil) }
        let result = try c.waitUpdate(timeoutMs: -1)
        #expect(result?.0 == .ok)
        #expect(failures.count == 0)
        #expect(c.currentVersion == 2)
    }
}

final class ResolveFailures: @unchecked Sendable {  // counter guarded by its own mutex
    private var n = 0
    private var lock = pthread_mutex_t()
    init() { pthread_mutex_init(&lock, nil) }
    func add() { pthread_mutex_lock(&lock); n += 1; pthread_mutex_unlock(&lock) }
    var count: Int { pthread_mutex_lock(&lock); defer { pthread_mutex_unlock(&lock) }; return n }
}
