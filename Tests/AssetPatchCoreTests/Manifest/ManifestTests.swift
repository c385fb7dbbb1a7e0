import Testing
@testable import AssetPatchCore

@Suite struct ManifestTests {
    let sha = String(repeating: "ab", count: 32)

    func manifest(_ extra: String = "", files: String? = nil, version: String = "7") -> [UInt8] {
        let f = files ?? #"[{"path": "sub/a.png", "size": 3, "sha256": "\#(sha)"}]"#
        return Array(#"{"format": 1, "package": "game", "version": \#(version), "archive": {"url": "archives/x.zip", "size": 10, "sha256": "\#(sha)"}, "files": \#(f)\#(extra)}"#.utf8)
    }

    @Test func decodesFormat1() throws {
        let m = try Manifest.decode(manifest(#", "label": "winter", "expires": "2027-01-01T00:00:00Z", "min_app_version": "1.4.0", "future_field": {"x": 1}"#))
        #expect(m.kind == .format1)
        #expect(m.package == "game" && m.version == 7 && m.label == "winter")
        #expect(m.expires == 1_798_761_600)
        #expect(m.files == [ManifestFile(path: "sub/a.png", size: 3, sha256: sha)])
        #expect(m.archiveSize == 10 && m.archiveDigest == sha)
        #expect(!m.signatureVerified)
    }

    func located(_ zips: [String]) -> String {
        "[" + zips.enumerated().map { i, z in #"{"path": "f\#(i)", "size": 3, "sha256": "\#(sha)", "zip": \#(z)}"# }.joined(separator: ", ") + "]"
    }

    /// A manifest of a 100-byte archive whose files have these `zip` objects.
    func locatedManifest(_ zips: [String]) -> [UInt8] {
        Array(#"{"format": 1, "package": "g", "version": 1, "archive": {"url": "a.zip", "size": 100, "sha256": "\#(sha)"}, "files": \#(located(zips))}"#.utf8)
    }

    @Test func decodesZipLocations() throws {
        let m = try Manifest.decode(locatedManifest([#"{"header_offset": 0, "data_offset": 32, "compressed_size": 3, "method": 0}"#]))
        #expect(m.files[0].location == ArchiveLocation(headerOffset: 0, dataOffset: 32, compressedSize: 3, method: 0))
        #expect(try Manifest.decode(manifest()).files[0].location == nil, "locations are optional")
    }

    @Test(arguments: [
        [#"{"header_offset": 0, "data_offset": 32, "compressed_size": 3, "method": 14}"#],              // unknown method
        [#"{"header_offset": 0, "data_offset": 20, "compressed_size": 3, "method": 8}"#],              // no room for the header
        [#"{"header_offset": 0, "data_offset": 32, "compressed_size": 3000, "method": 8}"#],           // past the archive's end
        [#"{"header_offset": 0, "data_offset": 32, "compressed_size": 2, "method": 0}"#],              // stored, sizes differ
        [#"{"header_offset": -1, "data_offset": 32, "compressed_size": 3, "method": 0}"#],             // negative
        [#"{"header_offset": 0, "data_offset": 32, "compressed_size": 3, "method": 0}"#,
         #"{"header_offset": 34, "data_offset": 66, "compressed_size": 3, "method": 0}"#],            // overlapping files
        [#"{"header_offset": 0, "data_offset": 32, "compressed_size": 3, "method": 0}"#, "null"],       // some located, some not
    ])
    func refusesBadZipLocations(_ zips: [String]) {
        #expect(statusOf { _ = try Manifest.decode(locatedManifest(zips)) } == .manifest)
    }

    @Test func decodesTheLegacySeedManifest() throws {
        let m = try Manifest.decode(Array(#"{"url": "https://example.com/patch.zip", "md5": "E963ED645C50A004697530FA596F180B"}"#.utf8))
        #expect(m.kind == .legacy)
        #expect(m.archiveDigest == "e963ed645c50a004697530fa596f180b")
        #expect(m.digestAlgorithm == .md5)
    }

    @Test(arguments: [
        #"{"format": 1}"#,
        #"{"format": "1", "package": "g", "version": 1}"#,
        #"{"format": 2, "package": "g", "version": 1}"#,
        #"[1, 2]"#,
        #"{"url": "x"}"#,
        #"{"url": "x", "md5": "nothex"}"#,
    ])
    func refusesMalformedManifests(_ text: String) {
        #expect(statusOf { _ = try Manifest.decode(Array(text.utf8)) } == .manifest)
    }

    @Test func refusesBadFieldValues() {
        #expect(statusOf { _ = try Manifest.decode(manifest(version: "0")) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(version: "-3")) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(version: "1e400")) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(version: "99999999999999999999")) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(files: #"[{"path": "a", "size": -1, "sha256": "\#(sha)"}]"#)) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(files: #"[{"path": "../a", "size": 1, "sha256": "\#(sha)"}]"#)) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(files: #"[{"path": "a", "size": 1, "sha256": "\#(sha)"}, {"path": "a", "size": 1, "sha256": "\#(sha)"}]"#)) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(files: #"[{"path": "a", "size": 1, "sha256": "\#(sha)"}, {"path": "a/b", "size": 1, "sha256": "\#(sha)"}]"#)) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(files: #"[{"path": "a", "size": 1, "sha256": "short"}]"#)) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(files: #"[{"path": "a", "size": 9223372036854775807, "sha256": "\#(sha)"}, {"path": "b", "size": 9223372036854775807, "sha256": "\#(sha)"}, {"path": "c", "size": 9223372036854775807, "sha256": "\#(sha)"}]"#)) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(#", "expires": "tomorrow""#)) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(#", "min_app_version": "1.x""#)) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(#", "plugins": [{"name": "p", "path": "missing.so", "entry": "e"}]"#)) } == .manifest)
    }

    /// `head` names the channel's head beside a format-1 manifest: on its origin, never the
    /// manifest itself, never a local file for a remote manifest; not part of what the release is.
    @Test func namesAHeadOnItsOwnOrigin() throws {
        #expect(try Manifest.decode(manifest(#", "head": "head.json""#)).headURL == "head.json")
        #expect(statusOf { _ = try Manifest.decode(manifest(#", "head": """#)) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(#", "head": "a\nb""#)) } == .manifest)
        #expect(statusOf { _ = try Manifest.decode(manifest(#", "head": 3"#)) } == .manifest)
        let base = Location("https://cdn.example/app/manifest.json")!
        #expect(NamedHead.location("head.json", beside: base)?.url == "https://cdn.example/app/head.json")
        // Only a file beside the manifest: on a shared origin anything else may be another tenant's.
        #expect(NamedHead.location("channels/beta/head.json", beside: base) == nil)
        #expect(NamedHead.location("../other-app/head.json", beside: base) == nil)
        #expect(NamedHead.location("..", beside: base) == nil)
        #expect(NamedHead.location("head.json?x=1", beside: base) == nil)
        #expect(NamedHead.location("%2e%2e", beside: base) == nil)
        #expect(NamedHead.location("https://cdn.example/app/head.json", beside: base) == nil)
        #expect(NamedHead.location("https://other.example/head.json", beside: base) == nil)
        #expect(NamedHead.location("http://cdn.example/app/head.json", beside: base) == nil)
        #expect(NamedHead.location("https://cdn.example:8443/app/head.json", beside: base) == nil)
        #expect(NamedHead.location("file:///etc/head.json", beside: base) == nil)
        #expect(NamedHead.location("manifest.json", beside: base) == nil)
        #expect(NamedHead.location("head.json", beside: Location("file:///srv/repo/manifest.json")!)?.url == "file:///srv/repo/head.json")
        let plain = try Manifest.decode(manifest())
        let named = try Manifest.decode(manifest(#", "head": "head.json""#))
        #expect(Manifest.contentDigest(try JSONParser.parse(manifest())) == Manifest.contentDigest(try JSONParser.parse(manifest(#", "head": "head.json""#))))
        #expect(plain.headURL == nil && named.toJSON()["head"]?.string == "head.json")
    }

    /// A manifest's first bytes name its version, plain or in an envelope's base64 payload, as
    /// far as they go; a number the prefix cuts is no hint.
    @Test func hintsTheVersionFromTheFirstBytes() throws {
        let plain = Array("{\n  \"format\": 1,\n  \"package\": \"game\",\n  \"version\": 1234,\n  \"files\": []}".utf8)
        #expect(ManifestHints.version(plain) == 1234)
        #expect(ManifestHints.version(Array(plain.prefix(plain.count - 15))) == 1234)
        #expect(ManifestHints.version(Array(plain.prefix(plain.count - 16))) == nil, "cut right after the digits")
        #expect(ManifestHints.version(Array(plain.prefix(plain.count - 17))) == nil, "cut after \"123\"")
        #expect(ManifestHints.version(Array(#"{"format": 1, "package": "g"}"#.utf8)) == nil)
        let wrapped = try envelope(plain, seed: [UInt8](repeating: 7, count: 32))
        #expect(ManifestHints.version(wrapped) == 1234)
        #expect(ManifestHints.version(Array(wrapped.prefix(200))) == 1234)
        #expect(ManifestHints.version(Array(wrapped.prefix(60))) == nil)
        // A package name that holds the word is not the key (its quotes are escaped).
        #expect(ManifestHints.version(Array(#"{"package": "a\"version\": 9", "version": 3, "x": 1}"#.utf8)) == 3)
    }

    func envelope(_ payload: [UInt8], seed: [UInt8], type: String = DSSE.payloadType, keyid: String? = nil, flip: Bool = false) throws -> [UInt8] {
        var sig = try Ed25519.sign(DSSE.pae(payloadType: type, payload: payload), seed: seed)
        if flip { sig[0] ^= 1 }
        var sigObj: [(String, JSON)] = [("sig", .string(Base64.encode(sig)))]
        if let keyid { sigObj.insert(("keyid", .string(keyid)), at: 0) }
        return Array(JSON.object([("payloadType", .string(type)), ("payload", .string(Base64.encode(payload))),
                                  ("signatures", .array([.object(sigObj)]))]).serialized().utf8)
    }

    @Test func verifiesSignedEnvelopes() throws {
        let (seed, pub) = try Ed25519.generate()
        let (otherSeed, otherPub) = try Ed25519.generate()
        let payload = manifest()
        let good = try envelope(payload, seed: seed, keyid: Ed25519.keyID(pub))
        #expect(try Manifest.decode(good, trustedKeys: [pub]).signatureVerified)
        // Rotation: any trusted key will do, with or without a keyid hint.
        #expect(try Manifest.decode(good, trustedKeys: [otherPub, pub]).signatureVerified)
        #expect(try Manifest.decode(try envelope(payload, seed: seed), trustedKeys: [otherPub, pub]).signatureVerified)
        // Without keys an envelope is accepted unverified.
        #expect(try !Manifest.decode(good).signatureVerified)

        #expect(statusOf { _ = try Manifest.decode(good, trustedKeys: [otherPub]) } == .signature)
        #expect(statusOf { _ = try Manifest.decode(try envelope(payload, seed: otherSeed), trustedKeys: [pub]) } == .signature)
        #expect(statusOf { _ = try Manifest.decode(try envelope(payload, seed: seed, flip: true), trustedKeys: [pub]) } == .signature)
        #expect(statusOf { _ = try Manifest.decode(try envelope(payload, seed: seed, type: "text/plain"), trustedKeys: [pub]) } == .signature)
        #expect(statusOf { _ = try Manifest.decode(payload, trustedKeys: [pub]) } == .signature)
        var tampered = payload
        tampered[tampered.count - 3] = UInt8(ascii: " ")
        let sig = try Ed25519.sign(DSSE.pae(payloadType: DSSE.payloadType, payload: payload), seed: seed)
        let swapped = Array(JSON.object([("payloadType", .string(DSSE.payloadType)), ("payload", .string(Base64.encode(tampered))),
                                         ("signatures", .array([.object([("sig", .string(Base64.encode(sig)))])]))]).serialized().utf8)
        #expect(statusOf { _ = try Manifest.decode(swapped, trustedKeys: [pub]) } == .signature)
    }
}
