import Glibc
import Testing
@testable import AssetPatchCore

/// A repository with channels, published as `assetpatch publish --channel` does.
private struct ChannelRepo {
    let repo = TempDir()
    let staging = TempDir()

    func cleanup() { repo.cleanup(); staging.cleanup() }

    @discardableResult
    func publish(_ text: String, version: Int64? = nil, channel: String? = nil, rollout: Rollout? = nil,
                 seeds: [[UInt8]] = [], package: String = "game") throws -> PublishResult {
        try staging.write("a.txt", text)
        var r = PublishRequest(source: staging.path, repo: repo.path)
        r.package = package
        r.version = version
        r.channel = channel
        r.rollout = rollout
        r.seeds = seeds
        return try Publisher.publish(r)
    }

    func url(_ channel: String = Channel.defaultName, head: Bool = true) -> String {
        URLs.fileURL(forPath: ChannelManifests.directory(repo: repo.path, channel: channel) + (head ? "/head.json" : "/manifest.json"))
    }
}

private func client(_ data: TempDir, _ url: String, keys: [[UInt8]] = [], options: [(String, String)] = []) throws -> Client {
    let c = try Client(dataDir: data.path, bundleDir: nil)
    try c.set("manifest_url", url)
    if !keys.isEmpty { try c.set("public_keys", keys.map(Base64.encode).joined(separator: ",")) }
    for (k, v) in options { try c.set(k, v) }
    return c
}

private func served(_ c: Client) throws -> String {
    String(decoding: try FS.readFile(try c.resolve("a.txt")), as: UTF8.self)
}

/// A rollout id whose bucket for (package, version) is below or at/above `basisPoints`.
private func rolloutID(package: String, version: Int64, inside: Bool, basisPoints: Int) -> String {
    for i in 0..<100_000 {
        let id = "client-\(i)"
        if (Rollout.bucket(package: package, version: version, rolloutID: id) < basisPoints) == inside { return id }
    }
    fatalError("no id found")
}

@Suite struct RolloutTests {
    /// Values computed with Python's hashlib, not with this code:
    /// int.from_bytes(sha256(f"{package}/{version}/{id}").digest()[:8], "big") % 10000.
    @Test func theBucketIsTheDocumentedFormula() {
        #expect(Rollout.bucket(package: "test", version: 3, rolloutID: "client-a") == 4843)
        #expect(Rollout.bucket(package: "game", version: 12, rolloutID: "0123456789abcdef0123456789abcdef") == 2827)
        #expect(Rollout.takes(bucket: 4843, percent: 48.44) && !Rollout.takes(bucket: 4843, percent: 48.43))
        #expect(!Rollout.takes(bucket: 0, percent: 0) && Rollout.takes(bucket: 9999, percent: 100))
    }

    @Test func aScheduleRaisesTheShareAtItsTimes() throws {
        let r = Rollout(percent: 5, schedule: [.init(at: 1000, percent: 20), .init(at: 2000, percent: 100)])
        #expect(r.percent(at: 999) == 5 && r.percent(at: 1000) == 20 && r.percent(at: 1999) == 20 && r.percent(at: 5000) == 100)
        let back = try Rollout.decode(r.toJSON(), source: "t")
        #expect(back == r)
        #expect(Rollout.format(12.5) == "12.5" && Rollout.format(0.01) == "0.01" && Rollout.format(100) == "100")
        for bad in [#"{"percent": 101}"#, #"{"percent": -1}"#, #"{"percent": "10"}"#,
                    #"{"percent": 1, "schedule": [{"at": "2026-01-02T00:00:00Z", "percent": 2}, {"at": "2026-01-01T00:00:00Z", "percent": 3}]}"#] {
            #expect(statusOf { _ = try Rollout.decode(try JSONParser.parse(Array(bad.utf8)), source: "t") } == .manifest, "\(bad)")
        }
    }

    /// Clients outside a rollout get no update (and say why); raising the share takes them in
    /// and never drops one that qualified; a halt installs nowhere new and leaves installed
    /// clients on the release.
    @Test func clientsInsideTakeTheReleaseOthersWaitAndAHaltKeepsWhatIsInstalled() throws {
        let r = ChannelRepo(), inData = TempDir(), outData = TempDir()
        defer { r.cleanup(); inData.cleanup(); outData.cleanup() }
        try r.publish("v1", version: 1)
        try r.publish("v2", version: 2, rollout: Rollout(percent: 30))
        let inside = try client(inData, r.url(), options: [("rollout_id", rolloutID(package: "game", version: 2, inside: true, basisPoints: 3000))])
        let outsideID = rolloutID(package: "game", version: 2, inside: false, basisPoints: 3000)
        let outside = try client(outData, r.url(), options: [("rollout_id", outsideID)])
        defer { inside.close(); outside.close() }

        #expect(try inside.update(progress: nil))
        #expect(try served(inside) == "v2")
        #expect(try !outside.update(progress: nil))
        let o = try #require(outside.lastCheck)
        #expect(o.status == .noUpdate && o.reason == .notInRollout && o.manifestVersion == 2)
        #expect(o.rollout?.basisPoints == 3000 && o.rollout?.bucket == Rollout.bucket(package: "game", version: 2, rolloutID: outsideID))
        #expect(try outside.check() == nil && outside.release(.candidate) == nil)
        // Not taking a release pins nothing, but the channel's mark rises to what was seen: a
        // copy signed before it (before a halt) is older from now on.
        #expect(try outside.state().highestVersion == 2 && outside.state().channelPin == nil)

        // The halt: the installed client keeps version 2, the other still gets nothing.
        _ = try ChannelManifests.rewrite(repo: r.repo.path, channel: Channel.defaultName, rollout: Rollout(percent: 0), keepRollout: false, seeds: [])
        #expect(try !inside.update(progress: nil) && inside.lastCheck?.reason == .current)
        #expect(try served(inside) == "v2" && inside.release(.active)?.rolloutBasisPoints == 3000)
        #expect(try !outside.update(progress: nil) && outside.lastCheck?.reason == .notInRollout && outside.lastCheck?.rollout?.basisPoints == 0)

        // Everyone: the rollout is dropped from the manifest.
        _ = try ChannelManifests.rewrite(repo: r.repo.path, channel: Channel.defaultName, rollout: nil, keepRollout: false, seeds: [])
        #expect(try outside.update(progress: nil))
        #expect(try served(outside) == "v2" && outside.release(.active)?.rolloutBasisPoints == nil)
    }

    /// Without the option, the id is random, made once per data directory and kept.
    @Test func theDefaultRolloutIDIsKeptPerDataDirectory() throws {
        let a = TempDir(), b = TempDir()
        defer { a.cleanup(); b.cleanup() }
        let s1 = try Store(root: a.path), s2 = try Store(root: b.path)
        let id = try s1.rolloutID()
        let again = try s1.rolloutID(), reopened = try Store(root: a.path).rolloutID()
        #expect(Hex.isHex(id, length: 32) && again == id && reopened == id)
        #expect(try s2.rolloutID() != id)
    }

    /// A manifest whose percentage was edited after signing is refused and changes nothing.
    @Test func aTamperedPercentageIsASignatureError() throws {
        let r = ChannelRepo(), data = TempDir()
        defer { r.cleanup(); data.cleanup() }
        let (seed, pub) = try Ed25519.generate()
        try r.publish("v1", version: 1, seeds: [seed])
        let c = try client(data, r.url(), keys: [pub])
        defer { c.close() }
        #expect(try c.update(progress: nil))
        try r.publish("v2", version: 2, rollout: Rollout(percent: 1), seeds: [seed])
        // Raise the share to 100 in the payload, keep the signature.
        let path = r.repo.path + "/head.json"
        let envelope = try JSONParser.parse(try FS.readFile(path))
        let payload = String(decoding: Base64.decode(envelope["payload"]!.string!)!, as: UTF8.self)
        #expect(payload.contains("\"percent\": 1"))
        let forged = Array(payload.replacing("\"percent\": 1", with: "\"percent\": 100").utf8)
        try MutableFile.write(path, Array(envelope.setting("payload", .string(Base64.encode(forged))).serialized().utf8))
        #expect(statusOf { _ = try c.update(progress: nil) } == .signature)
        #expect(try served(c) == "v1")
    }
}

@Suite struct ChannelTests {
    /// beta runs ahead; a client follows the channel its first manifest named, so stable's
    /// manifest at its URL alone is refused (a mirror can't move it); naming the channel moves
    /// it down at once; a replayed older stable manifest stays refused.
    @Test func movingBetweenChannels() throws {
        let r = ChannelRepo(), data = TempDir()
        defer { r.cleanup(); data.cleanup() }
        let (seed, pub) = try Ed25519.generate()
        try r.publish("stable 1", seeds: [seed])
        try r.publish("beta 2", channel: "beta", seeds: [seed])
        #expect(try ChannelManifests.read(repo: r.repo.path, channel: "beta")?.version == 2)
        // What a channel offers, read without its files (signed envelope and plain payload alike).
        #expect(try ChannelManifests.offered(repo: r.repo.path, channel: "beta").map { [String($0.version), $0.package] } == ["2", "game"])
        #expect(try ChannelManifests.offered(repo: r.repo.path, channel: "stable").map { [String($0.version), $0.package] } == ["1", "game"])
        #expect(try ChannelManifests.offered(repo: r.repo.path, channel: "nightly") == nil)
        #expect(try ChannelManifests.payload(r.repo.path + "/channels/beta/manifest.json", listingFiles: false)["files"] == .array([]))
        #expect(try ChannelManifests.payload(r.repo.path + "/channels/beta/manifest.json")["files"]?.array?.count == 2)
        #expect(ChannelManifests.highestVersion(repo: r.repo.path) == 2)
        let beta = try JSONParser.parse(try FS.readFile(r.repo.path + "/channels/beta/manifest.json"))
        let betaPayload = try JSONParser.parse(Base64.decode(beta["payload"]!.string!)!)
        #expect(betaPayload["channel"]?.string == "beta" && betaPayload["archive"]?["url"]?.string?.hasPrefix("../../archives/") == true)

        let c = try client(data, r.url("beta"), keys: [pub])
        defer { c.close() }
        #expect(try c.update(progress: nil) && served(c) == "beta 2")
        #expect(try c.release(.active)?.channel == "beta")

        // Back to stable by URL alone: another channel's manifest, refused, and nothing changes.
        try c.set("manifest_url", r.url())
        #expect(statusOf { _ = try c.update(progress: nil) } == .manifest)
        #expect(try c.lastCheck?.channel == "stable" && c.state().channelPin == ChannelPin(name: "beta", source: .verifiedManifest))
        #expect(try served(c) == "beta 2")

        // The explicit move.
        try c.set("channel", "stable")
        #expect(try c.update(progress: nil) && served(c) == "stable 1")
        #expect(try c.release(.active)?.channel == "stable")

        // Replays within stable stay refused: stable 3, then its old manifest again.
        let old = try FS.readFile(r.repo.path + "/head.json")
        try r.publish("stable 3", seeds: [seed])
        #expect(try c.update(progress: nil) && served(c) == "stable 3")
        try MutableFile.write(r.repo.path + "/head.json", old)
        #expect(try !c.update(progress: nil) && c.lastCheck?.reason == .older)

        // A manifest of another channel at a channel-following client is refused.
        try c.set("manifest_url", r.url("beta"))
        #expect(statusOf { _ = try c.update(progress: nil) } == .manifest)
        #expect(try served(c) == "stable 3")
    }

    @Test func promotionOffersTheSameArchiveAndVersionsOnlyGoUp() throws {
        let r = ChannelRepo(), data = TempDir()
        defer { r.cleanup(); data.cleanup() }
        let (seed, pub) = try Ed25519.generate()
        try r.publish("s1", seeds: [seed])
        let b2 = try r.publish("b2", channel: "beta", seeds: [seed])
        try r.publish("b3", channel: "beta", seeds: [seed])
        #expect(b2.manifest.version == 2)
        // Promote beta's older version 2 (from the history), then its current 3.
        let p = try ChannelManifests.promote(repo: r.repo.path, from: "beta", to: "stable", version: 2, rollout: nil, seeds: [seed])
        #expect(p.version == 2 && p.archiveSHA == b2.manifest.archiveDigest)
        let stable = try Manifest.decode(try FS.readFile(r.repo.path + "/manifest.json"), trustedKeys: [pub])
        #expect(stable.version == 2 && stable.channel == nil && stable.archiveDigest == b2.manifest.archiveDigest && stable.signatureVerified)
        #expect(statusOf { _ = try ChannelManifests.promote(repo: r.repo.path, from: "beta", to: "stable", version: 2, rollout: nil, seeds: [seed]) } == .argument)
        _ = try ChannelManifests.promote(repo: r.repo.path, from: "beta", to: "stable", version: nil, rollout: Rollout(percent: 100), seeds: [seed])
        #expect(statusOf { _ = try ChannelManifests.promote(repo: r.repo.path, from: "stable", to: "beta", version: nil, rollout: nil, seeds: [seed]) } == .argument)
        // Publishing a version another channel offers is refused; the next free one is taken.
        #expect(statusOf { try r.publish("x", version: 3, channel: "qa") } == .argument)
        #expect(try r.publish("q4", channel: "qa").manifest.version == 4)

        let c = try client(data, r.url(), keys: [pub])
        defer { c.close() }
        #expect(try c.update(progress: nil) && served(c) == "b3")
    }

    /// A channel manifest that names another package is refused like any other.
    @Test func aChannelManifestOfAnotherPackageIsRefused() throws {
        let r = ChannelRepo(), data = TempDir()
        defer { r.cleanup(); data.cleanup() }
        try r.publish("one")
        let c = try client(data, r.url(), options: [("package", "game")])
        defer { c.close() }
        #expect(try c.update(progress: nil))
        try r.publish("evil", channel: "beta", package: "other")
        try c.set("manifest_url", r.url("beta"))
        #expect(statusOf { _ = try c.update(progress: nil) } == .manifest)
        #expect(try served(c) == "one")
    }
}

@Suite struct KeyDocumentTests {
    struct Keys {
        let seeds: [[UInt8]]
        let pubs: [[UInt8]]
        init(_ n: Int) throws {
            var s: [[UInt8]] = [], p: [[UInt8]] = []
            for _ in 0..<n { let k = try Ed25519.generate(); s.append(k.seed); p.append(k.publicKey) }
            seeds = s
            pubs = p
        }
    }

    private func document(_ repo: TempDir, root: Keys, rootThreshold: Int, signing: Keys, signingThreshold: Int,
                          signers: [[UInt8]], expires: Int64 = unixTime() + 86400) throws -> KeyDocument {
        var doc = KeyDocument(version: (KeyDocuments.versions(repo: repo.path).last ?? 0) + 1, expires: expires,
                              root: KeySet(keys: root.pubs, threshold: rootThreshold),
                              signing: KeySet(keys: signing.pubs, threshold: signingThreshold))
        for s in signers { try doc.sign(seed: s) }
        return doc
    }

    /// Pinned key → document 1 (2-of-3 root, 2-of-2 signing) → document 2 rotating a signing
    /// key out. Manifests need a threshold of distinct signatures, the chain is followed and
    /// kept, and the rotated key signs nothing this client accepts afterwards.
    @Test func theChainIsFollowedThresholdsCountAndARotatedKeyIsRefused() throws {
        let r = ChannelRepo(), data = TempDir()
        defer { r.cleanup(); data.cleanup() }
        let pinned = try Keys(1), root = try Keys(3), signing = try Keys(3)
        try r.publish("v1", seeds: pinned.seeds)
        let c = try client(data, r.url(), keys: pinned.pubs)
        defer { c.close() }
        #expect(try c.update(progress: nil))

        let doc1 = try document(r.repo, root: root, rootThreshold: 2, signing: Keys(0).with(signing, 0..<2), signingThreshold: 2,
                                signers: [pinned.seeds[0], root.seeds[0], root.seeds[2]])
        _ = try KeyDocuments.publish(doc1, repo: r.repo.path, pinned: pinned.pubs)
        // One signing key twice is one signature: the publisher refuses, so does the client.
        #expect(statusOf { try r.publish("v2", seeds: [signing.seeds[0], signing.seeds[0]]) } == .argument)
        try r.publish("v2", seeds: [signing.seeds[0], signing.seeds[1]])
        #expect(try c.update(progress: nil) && served(c) == "v2")
        let head = r.repo.path + "/head.json"
        let good = try FS.readFile(head)
        try MutableFile.write(head, try duplicateFirstSignature(good))
        #expect(statusOf { _ = try c.check() } == .signature)
        try MutableFile.write(head, good)

        // Rotate signing key 1 out: document 2 has signing keys 0 and 2.
        let doc2 = try document(r.repo, root: root, rootThreshold: 2, signing: Keys(0).with(signing, [0, 2]), signingThreshold: 2,
                                signers: [root.seeds[1], root.seeds[2]])
        _ = try KeyDocuments.publish(doc2, repo: r.repo.path, pinned: [])
        try r.publish("v3", seeds: [signing.seeds[0], signing.seeds[2]])
        #expect(try c.update(progress: nil) && served(c) == "v3")
        #expect(c.store.keptKeyDocument(anchor: KeyDocument.pinned(pinned.pubs))?.version == 2)

        // An attacker holding the rotated-out key (and key 0) signs version 4 under document 1.
        let evil = ChannelRepo()
        defer { evil.cleanup() }
        try FS.makeDirectories(evil.repo.path + "/keys")
        try FS.writeAtomically(evil.repo.path + "/keys/1.json", try FS.readFile(r.repo.path + "/keys/1.json"))
        try evil.publish("evil", version: 4, seeds: [signing.seeds[0], signing.seeds[1]])
        try c.set("manifest_url", evil.url())
        #expect(statusOf { _ = try c.update(progress: nil) } == .signature)
        #expect(try served(c) == "v3")
    }

    /// Documents that skip a signature, replay an older document under a newer name, were
    /// forged by a non-root key, or have expired, are refused; the active release stays.
    @Test func hostileKeyDocumentsAreRefused() throws {
        let pinned = try Keys(1), root = try Keys(2), other = try Keys(1)
        struct Case { let name: String; let status: Status; var signer: [UInt8]? = nil; let make: (TempDir) throws -> KeyDocument }
        let cases: [Case] = [
            Case(name: "not signed by the pinned key", status: .signature) { repo in
                try self.document(repo, root: root, rootThreshold: 1, signing: root, signingThreshold: 1, signers: [root.seeds[0]])
            },
            Case(name: "below its own root threshold", status: .signature) { repo in
                try self.document(repo, root: root, rootThreshold: 2, signing: root, signingThreshold: 1, signers: [pinned.seeds[0], root.seeds[0]])
            },
            Case(name: "forged by another key", status: .signature, signer: other.seeds[0]) { repo in
                try self.document(repo, root: other, rootThreshold: 1, signing: other, signingThreshold: 1, signers: [other.seeds[0]])
            },
            Case(name: "expired", status: .expired) { repo in
                try self.document(repo, root: root, rootThreshold: 1, signing: root, signingThreshold: 1,
                                  signers: [pinned.seeds[0], root.seeds[0]], expires: unixTime() - 10)
            },
        ]
        for k in cases {
            let r = ChannelRepo(), data = TempDir()
            defer { r.cleanup(); data.cleanup() }
            try r.publish("v1", seeds: pinned.seeds)
            let c = try client(data, r.url(), keys: pinned.pubs)
            defer { c.close() }
            #expect(try c.update(progress: nil))
            let doc = try k.make(r.repo)
            // Written as a publisher that skips the checks would.
            try FS.makeDirectories(r.repo.path + "/keys")
            try FS.writeAtomically(r.repo.path + "/keys/1.json", doc.serialized())
            try r.publish("v2", seeds: [k.signer ?? root.seeds[0]])
            #expect(statusOf { _ = try c.update(progress: nil) } == k.status, "\(k.name)")
            #expect(try served(c) == "v1", "\(k.name)")
            // A document is kept only once a manifest naming it is accepted: neither a refused
            // one nor an authentic one that expired (the check fails, and changes nothing).
            #expect(c.store.keptKeyDocument(anchor: KeyDocument.pinned(pinned.pubs)) == nil, "\(k.name)")
        }

        // A replay: document 1 served as keys/2.json.
        let r = ChannelRepo(), data = TempDir()
        defer { r.cleanup(); data.cleanup() }
        try r.publish("v1", seeds: pinned.seeds)
        let d1 = try document(r.repo, root: root, rootThreshold: 1, signing: root, signingThreshold: 1, signers: [pinned.seeds[0], root.seeds[0]])
        _ = try KeyDocuments.publish(d1, repo: r.repo.path, pinned: pinned.pubs)
        let d2 = try document(r.repo, root: root, rootThreshold: 1, signing: root, signingThreshold: 1, signers: [root.seeds[0]])
        _ = try KeyDocuments.publish(d2, repo: r.repo.path, pinned: [])
        try r.publish("v2", seeds: [root.seeds[0]])
        try FS.writeAtomically(r.repo.path + "/keys/2.json", d1.serialized())
        let c = try client(data, r.url(), keys: pinned.pubs)
        defer { c.close() }
        #expect(statusOf { _ = try c.update(progress: nil) } == .signature)
    }

    /// A host may pin a key document instead of keys; a repository without documents keeps
    /// working with pinned keys as before.
    @Test func aPinnedKeyDocumentAnchorsTheChain() throws {
        let r = ChannelRepo(), data = TempDir(), shipped = TempDir()
        defer { r.cleanup(); data.cleanup(); shipped.cleanup() }
        let root = try Keys(1), signing = try Keys(1)
        let d1 = try document(r.repo, root: root, rootThreshold: 1, signing: signing, signingThreshold: 1, signers: [root.seeds[0]])
        let path = try KeyDocuments.publish(d1, repo: r.repo.path, pinned: [])
        try shipped.write("keys.json", try FS.readFile(path))
        try r.publish("v1", seeds: signing.seeds)
        let c = try client(data, r.url(), options: [("key_document", shipped.path + "/keys.json")])
        defer { c.close() }
        #expect(try c.update(progress: nil) && c.release(.active)?.signatureVerified == true)
        // An unsigned document can't be pinned.
        try shipped.write("unsigned.json", KeyDocument(version: 1, expires: unixTime() + 60, root: KeySet(keys: root.pubs, threshold: 1),
                                                       signing: KeySet(keys: root.pubs, threshold: 1)).serialized())
        #expect(statusOf { try c.set("key_document", shipped.path + "/unsigned.json") } == .argument)
    }
}

extension KeyDocumentTests.Keys {
    /// These keys plus the members `indices` of `other`.
    func with<S: Sequence<Int>>(_ other: KeyDocumentTests.Keys, _ indices: S) -> KeyDocumentTests.Keys {
        var copy = self
        for i in indices { copy = KeyDocumentTests.Keys(seeds: copy.seeds + [other.seeds[i]], pubs: copy.pubs + [other.pubs[i]]) }
        return copy
    }

    init(seeds: [[UInt8]], pubs: [[UInt8]]) {
        self.seeds = seeds
        self.pubs = pubs
    }
}

/// The envelope with its first signature listed twice and the others dropped.
private func duplicateFirstSignature(_ bytes: [UInt8]) throws -> [UInt8] {
    let env = try JSONParser.parse(bytes)
    let first = try #require(env["signatures"]?.array?.first)
    return Array(env.setting("signatures", .array([first, first])).serialized().utf8)
}
