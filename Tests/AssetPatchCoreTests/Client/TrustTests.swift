import Glibc
import Testing
@testable import AssetPatchCore

/// What a client takes from a host that signs several products with one key, from replayed
/// and expired manifests, and from what it accepted before the app set keys.
@Suite struct TrustTests {
    func files(_ text: String) -> [(String, [UInt8])] { [("level.txt", Array(text.utf8))] }

    func read(_ c: Client) throws -> String { String(decoding: try FS.readFile(try c.resolve("level.txt")), as: UTF8.self) }

    func base64(_ key: [UInt8]) -> String { Base64.encode(key) }

    /// `{"package": "game", "version": 3}` in the bundle: the game's package is pinned before any
    /// manifest is seen. The editor's signed manifests (same key) are refused, below and above
    /// the bundle's version, and change nothing: no pin, no mark, nothing installed.
    @Test func anotherProductsSignedManifestNeitherPinsNorInstalls() throws {
        let games = TempDir(), editors = TempDir(), data = TempDir(), bundle = TempDir()
        defer { games.cleanup(); editors.cleanup(); data.cleanup(); bundle.cleanup() }
        let (seed, pub) = try Ed25519.generate()
        try bundle.write("level.txt", "bundle")
        try BundleMarker.write(bundle.path, package: "game", version: 3)
        let c = try Client(dataDir: data.path, bundleDir: bundle.path)
        defer { c.close() }
        try c.set("public_keys", base64(pub))
        let before = try c.state()
        #expect(before.pin == PackagePin(name: "game", source: .bundle))
        for version: Int64 in [2, 9] {
            try c.set("manifest_url", try publishRelease(files("editor \(version)"), version: version, repo: editors, package: "editor", seed: seed))
            #expect(statusOf { _ = try c.check() } == .manifest, "check of editor \(version)")
            #expect(statusOf { _ = try c.update(progress: nil) } == .manifest, "update to editor \(version)")
            #expect(try c.state() == before, "editor \(version) changed the state")
            #expect(try read(c) == "bundle" && c.currentVersion == 0)
        }
        try c.reset()
        try c.set("manifest_url", try publishRelease(files("game 4"), version: 4, repo: games, package: "game", seed: seed))
        #expect(try c.update(progress: nil) && read(c) == "game 4")
    }

    /// The package option ranks above the bundle marker, and the two disagreeing do not make
    /// every open drop the releases again.
    @Test func thePackageOptionRanksAboveTheBundleMarkerAndStaysPut() throws {
        let repo = TempDir(), data = TempDir(), bundle = TempDir()
        defer { repo.cleanup(); data.cleanup(); bundle.cleanup() }
        try BundleMarker.write(bundle.path, package: "old-name", version: 1)
        let url = try publishRelease(files("v2"), version: 2, repo: repo, package: "new-name")
        for _ in 0..<2 {
            let c = try Client(dataDir: data.path, bundleDir: bundle.path)
            try c.set("package", "new-name")
            try c.set("manifest_url", url)
            _ = try c.update(progress: nil)
            #expect(try read(c) == "v2" && c.currentVersion == 2)
            #expect(try c.state().pin == PackagePin(name: "new-name", source: .option))
            c.close()
        }
        for bad in ["", "a\nb", String(repeating: "x", count: 257)] {
            let c = try Client(dataDir: data.path, bundleDir: nil)
            #expect(statusOf { try c.set("package", bad) } == .argument)
            c.close()
        }
    }

    /// A host that names no package keeps trust on first use: the first manifest pins.
    @Test func withoutANamedPackageTheFirstManifestPins() throws {
        let repo = TempDir(), other = TempDir(), data = TempDir()
        defer { repo.cleanup(); other.cleanup(); data.cleanup() }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", try publishRelease(files("a"), version: 1, repo: repo, package: "first"))
        #expect(try c.check() != nil)
        #expect(try c.state().pin == PackagePin(name: "first", source: .manifest))
        try c.set("manifest_url", try publishRelease(files("b"), version: 2, repo: other, package: "second"))
        #expect(statusOf { _ = try c.check() } == .manifest)
    }

    /// A client on version 5 whose manifest has expired: the same manifest (replayed, or kept
    /// and reused) is ERR_EXPIRED, not "no update", as it is for a fresh data directory.
    @Test func anExpiredManifestOfTheInstalledVersionIsAnError() throws {
        let repo = TempDir(), data = TempDir(), fresh = TempDir()
        defer { repo.cleanup(); data.cleanup(); fresh.cleanup() }
        let (seed, pub) = try Ed25519.generate()
        func publish(expires: Int64) throws -> String {
            try publishRelease(files("v5"), version: 5, repo: repo, seed: seed) { $0.append(("expires", .string(RFC3339.format(expires)))) }
        }
        let url = try publish(expires: unixTime() + 3600)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("public_keys", base64(pub))
        try c.set("manifest_url", url)
        #expect(try c.update(progress: nil) && c.currentVersion == 5)
        #expect(try c.update(progress: nil) == false)
        _ = try publish(expires: unixTime() - 1)
        #expect(statusOf { _ = try c.check() } == .expired)
        #expect(statusOf { _ = try c.update(progress: nil) } == .expired)
        #expect(try read(c) == "v5", "the installed release is still served")
        let f = try Client(dataDir: fresh.path, bundleDir: nil)
        defer { f.close() }
        try f.set("public_keys", base64(pub))
        try f.set("manifest_url", url)
        #expect(statusOf { _ = try f.update(progress: nil) } == .expired)
    }

    /// Without keys the client took an unsigned manifest of version 2^62 (a man in the middle of
    /// plain HTTP can serve one). Once the app sets keys, that release is not served and its
    /// version constrains nothing: the genuine signed version 5 installs.
    @Test func whatWasAcceptedUnverifiedStopsCountingOnceKeysAreSet() throws {
        let evil = TempDir(), genuine = TempDir(), data = TempDir(), bundle = TempDir()
        defer { evil.cleanup(); genuine.cleanup(); data.cleanup(); bundle.cleanup() }
        try bundle.write("level.txt", "bundle")
        let (seed, pub) = try Ed25519.generate()
        let before = try Client(dataDir: data.path, bundleDir: bundle.path)
        try before.set("manifest_url", try publishRelease(files("attacker"), version: 1 << 62, repo: evil, package: "game"))
        #expect(try before.update(progress: nil) && read(before) == "attacker")
        before.close()

        let after = try Client(dataDir: data.path, bundleDir: bundle.path)
        defer { after.close() }
        try after.set("public_keys", base64(pub))
        #expect(try read(after) == "bundle" && after.currentVersion == 0, "the unverified release is no longer served")
        try after.set("manifest_url", try publishRelease(files("genuine 5"), version: 5, repo: genuine, package: "game", seed: seed))
        #expect(try after.update(progress: nil) && read(after) == "genuine 5")
        try after.reset()
        #expect(try after.update(progress: nil) && read(after) == "genuine 5", "after a reset too")
        // An unverified pin does not count either: another package, signed, would be taken...
        // but a verified pin does.
        #expect(try after.state().pin == PackagePin(name: "game", source: .verifiedManifest))
    }

    /// A value that names no key does not turn verification off: only leaving the option unset does.
    @Test func publicKeysThatNameNoKeyAreRefused() throws {
        let data = TempDir()
        defer { data.cleanup() }
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        for value in ["", ",", " ", " , ,", "\t"] {
            #expect(statusOf { try c.set("public_keys", value) } == .argument, "\"\(value)\"")
        }
        #expect(c.configuration.publicKeys.isEmpty)
    }
}
