import Testing
@testable import AssetPatchCore

@Suite struct ResourceNameTests {
    @Test(arguments: ["a", "sub/sample.png", "a/b/c.tar.gz", ".env", "dir/.hidden", "ünïcode/ß.txt", "a..b", "...x"])
    func acceptsSafeNames(_ name: String) { #expect(ResourceName.isValid(name)) }

    @Test(arguments: ["", "/etc/passwd", "../x", "a/../b", "a//b", "a/./b", "a/", ".", "..", "a\\b", "C:x", "c:/x", "a\u{0}b"])
    func refusesUnsafeNames(_ name: String) { #expect(!ResourceName.isValid(name)) }

    @Test func refusesInvalidUTF8() {
        let bytes: [UInt8] = [0x61, 0xFF, 0x62]
        #expect(!bytes.withUnsafeBytes { ResourceName.isValid($0) })
    }

    @Test func variantSuffixGoesBeforeTheLastExtension() {
        #expect(ResourceName.applyingVariant("sub/sample.png", "@3x") == "sub/sample@3x.png")
        #expect(ResourceName.applyingVariant("a.tar.gz", "@2x") == "a.tar@2x.gz")
        #expect(ResourceName.applyingVariant("README", "@2x") == "README@2x")
        #expect(ResourceName.applyingVariant(".env", "@2x") == ".env@2x")
        #expect(ResourceName.applyingVariant("dir.d/file", "@2x") == "dir.d/file@2x")
        #expect(ResourceName.applyingVariant("x.png", "") == "x.png")
    }

    /// Names in path order are checked without a set of them (an index's 100,000 files): the
    /// same answer as the set's, where a directory's files do not follow it directly ("a",
    /// "a-b", "a.png", "a/c": "-" and "." sort before "/").
    @Test func fileDirectoryConflictsInPathOrderAgreeWithTheSet() throws {
        #expect(try ResourceName.fileDirectoryConflict(sorted: ["a", "a-b", "a.png", "a/c"], source: "t") == "a")
        #expect(try ResourceName.fileDirectoryConflict(sorted: ["a", "a-b", "a.png", "a.png/x", "b"], source: "t") == "a.png")
        #expect(try ResourceName.fileDirectoryConflict(sorted: ["a-b", "a.png", "a/c", "ab", "ab0"], source: "t") == nil)
        #expect(try ResourceName.fileDirectoryConflict(sorted: ["d", "d/\u{301}x"], source: "t") == "d")
        #expect(statusOf { _ = try ResourceName.fileDirectoryConflict(sorted: ["b", "a"], source: "t") } == .manifest)
        #expect(statusOf { _ = try ResourceName.fileDirectoryConflict(sorted: ["a", "b", "b"], source: "t") } == .manifest)
        var x: UInt64 = 99
        func next() -> Int {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            return Int(x % 1_000_003)
        }
        let symbols = ["a", "b", "-", ".", "/", "0"]
        var conflicts = 0
        for _ in 0..<4000 {
            var names = Set<String>()
            for _ in 0..<(next() % 10) {
                let name = (0...(next() % 5)).map { _ in symbols[next() % symbols.count] }.joined()
                if ResourceName.isValid(name) { names.insert(name) }
            }
            let sorted = names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            let found = try ResourceName.fileDirectoryConflict(sorted: sorted, source: "t")
            #expect((found == nil) == (ResourceName.fileDirectoryConflict(in: names) == nil), "\(sorted)")
            if let found {
                conflicts += 1
                #expect(names.contains(found) && names.contains { $0.utf8.starts(with: (found + "/").utf8) }, "\(sorted)")
            }
            for n in names { #expect(ResourceName.contains(sorted: sorted, n)) }
            for probe in ["", "a", "a/", "b0", "zz"] where !names.contains(probe) { #expect(!ResourceName.contains(sorted: sorted, probe)) }
        }
        #expect(conflicts > 100, "the random names include conflicts")
    }
}

@Suite struct URLTests {
    @Test func resolvesRelativeReferences() {
        let base = "https://cdn.example/app/v1/manifest.json?x=1"
        #expect(URLs.resolve("archives/a.zip", against: base) == "https://cdn.example/app/v1/archives/a.zip")
        #expect(URLs.resolve("../b.zip", against: base) == "https://cdn.example/app/b.zip")
        #expect(URLs.resolve("/root.zip", against: base) == "https://cdn.example/root.zip")
        #expect(URLs.resolve("//other.example/c.zip", against: base) == "https://other.example/c.zip")
        #expect(URLs.resolve("http://x.example/d.zip", against: base) == "http://x.example/d.zip")
        #expect(URLs.resolve("archives/a.zip", against: "file:///srv/repo/manifest.json") == "file:///srv/repo/archives/a.zip")
    }

    @Test func schemesAreCaseInsensitive() {
        #expect(URLs.scheme("HTTPS://x/y") == .https)
        #expect(URLs.scheme("File:///x") == .file)
        #expect(URLs.scheme("ftp://x/y") == nil)
        #expect(URLs.scheme("gopher://x") == nil)
        #expect(URLs.scheme("/just/a/path") == nil)
    }

    @Test func fileURLsDecodeToPaths() {
        #expect(URLs.filePath("file:///tmp/a%20b/m.json") == "/tmp/a b/m.json")
        #expect(URLs.filePath("file://localhost/tmp/x") == "/tmp/x")
        #expect(URLs.filePath("file://evil.example/tmp/x") == nil)
        #expect(URLs.filePath("file:///tmp/%00x") == nil)
        #expect(URLs.filePath(URLs.fileURL(forPath: "/tmp/sp ace/ü.json")) == "/tmp/sp ace/ü.json")
    }

    @Test func redactionDropsCredentialsAndQueries() {
        #expect(URLs.redacted("https://user:secret@cdn.example/m.json?token=abc") == "https://cdn.example/m.json")
    }

    @Test func contentRangeParsing() {
        #expect(ContentRange.parse("bytes 100-199/200").map { [$0.start, $0.end, $0.total] } == [100, 199, 200])
        #expect(ContentRange.parse("bytes 100-99/200") == nil)
        #expect(ContentRange.parse("bytes 0-200/200") == nil)
        #expect(ContentRange.parse("bytes */200") == nil)
        #expect(ContentRange.parse("items 0-1/2") == nil)
    }
}

@Suite struct EncodingTests {
    @Test func base64AcceptsBothAlphabetsAndPadding() {
        let bytes: [UInt8] = [0xFB, 0xFF, 0x01, 0x02]
        #expect(Base64.encode(bytes) == "+/8BAg==")
        #expect(Base64.decode("+/8BAg==") == bytes)
        #expect(Base64.decode("+/8BAg") == bytes)
        #expect(Base64.decode("-_8BAg") == bytes)
        #expect(Base64.decode("+/8BA") == nil)
        #expect(Base64.decode("+/8B!g==") == nil)
        #expect(Base64.decode("+/8BAh==") == nil)  // non-zero trailing bits
        #expect(Base64.decode("") == [])
    }

    @Test func rfc3339() {
        #expect(RFC3339.parse("1970-01-01T00:00:00Z") == 0)
        #expect(RFC3339.parse("2027-01-01T00:00:00Z") == 1_798_761_600)
        #expect(RFC3339.parse("2027-01-01T08:00:00+08:00") == 1_798_761_600)
        #expect(RFC3339.parse("2027-01-01T00:00:00.123Z") == 1_798_761_600)
        #expect(RFC3339.parse("2027-02-30T00:00:00Z") == nil)
        #expect(RFC3339.parse("2027-01-01 00:00:00") == nil)
        #expect(RFC3339.format(1_798_761_600) == "2027-01-01T00:00:00Z")
    }

    @Test func appVersionsCompareNumerically() {
        #expect(AppVersion.compare(AppVersion.parse("1.10.0")!, AppVersion.parse("1.9.3")!) == 1)
        #expect(AppVersion.compare(AppVersion.parse("1.4")!, AppVersion.parse("1.4.0")!) == 0)
        #expect(AppVersion.parse("1..2") == nil)
        #expect(AppVersion.parse("1.x") == nil)
    }

    @Test func digests() throws {
        #expect(Digest.sha256Hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let md5 = try Digest(.md5)
        md5.update(Array("abc".utf8))
        #expect(md5.finalHex() == "900150983cd24fb0d6963f7d28e17f72")
    }

    @Test func ed25519RFC8032Vector() throws {
        // RFC 8032 section 7.1, TEST 1 (empty message).
        let seed = Array(hex: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
        let pub = try Ed25519.publicKey(fromSeed: seed)
        #expect(Hex.encode(pub) == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        let sig = try Ed25519.sign([], seed: seed)
        #expect(Hex.encode(sig) == "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
        #expect(Ed25519.verify(sig, of: [], publicKey: pub))
        var bad = sig
        bad[10] ^= 1
        #expect(!Ed25519.verify(bad, of: [], publicKey: pub))
        #expect(!Ed25519.verify(sig, of: [0], publicKey: pub))
    }
}

extension Array where Element == UInt8 {
    init(hex: String) {
        var out: [UInt8] = []
        var chars = Array(hex.utf8)[...]
        while chars.count >= 2 {
            out.append(UInt8(String(decoding: chars.prefix(2), as: UTF8.self), radix: 16) ?? 0)
            chars = chars.dropFirst(2)
        }
        self = out
    }
}

@Suite struct GraphemeSafetyTests {
    // "/" followed by a combining mark, and "\r\n", are single Characters in Swift: every
    // check on names and header values must work on bytes (found by fuzzing).
    @Test func slashBeforeACombiningMarkStillSplits() {
        let name = "dir/\u{0361}x.png"
        #expect(ResourceName.isValid(name))
        #expect(name.beforeLastSlash == "dir")
        #expect(name.slashComponents == ["dir", "\u{0361}x.png"])
        #expect(FS.parent(of: "/a/\u{0361}b") == "/a")
        #expect(!ResourceName.isValid("../\u{0361}"))
    }

    @Test func headerValuesWithCRLFAreRefused() {
        var c = ClientConfig()
        #expect(statusOf { try c.set("header", "X-A: 1\r\nX-Evil: 2") } == .argument)
        #expect(statusOf { try c.set("user_agent", "ua\r\nX-Evil: 2") } == .argument)
        #expect(statusOf { try c.set("variants", "@2x/\u{0361}") } == .argument)
    }

    @Test func installsNamesWithCombiningMarksAfterASlash() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let url = try publishRelease([("dir/\u{0361}x.txt", Array("ok".utf8))], version: 1, repo: repo)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", url)
        #expect(try c.update(progress: nil))
        #expect(try FS.readFile(try c.resolve("dir/\u{0361}x.txt")) == Array("ok".utf8))
    }
}

@Suite struct AbsolutePathTests {
    @Test func absolutePathsStartingWithACombiningMarkStayAbsolute() {
        #expect(FS.absolute("/\u{0361}data/x").utf8.elementsEqual("/\u{0361}data/x".utf8))
        #expect(FS.absolute("/a/./b/../c") == "/a/c")
    }
}

@Suite struct UTF8CheckTests {
    @Test(arguments: [
        [UInt8](), [0x41], [0xC3, 0xA9], [0xE2, 0x82, 0xAC], [0xF0, 0x9F, 0x98, 0x80], [0xEF, 0xBF, 0xBF], [0xF4, 0x8F, 0xBF, 0xBF],
    ])
    func acceptsValidSequences(_ bytes: [UInt8]) {
        #expect(UTF8Check.isValid(bytes))
        #expect(String(validating: bytes, as: UTF8.self) != nil)
    }

    @Test(arguments: [
        [UInt8]([0x80]), [0xC0, 0xAF], [0xC1, 0xBF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xF0, 0x80, 0x80, 0xAF],
        [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xC3], [0xE2, 0x82], [0xFF], [0x41, 0xC3, 0x41],
    ])
    func refusesInvalidSequences(_ bytes: [UInt8]) {
        #expect(!UTF8Check.isValid(bytes))
        #expect(String(validating: bytes, as: UTF8.self) == nil)
    }

    @Test func agreesWithTheStandardLibraryOnRandomBytes() {
        var x: UInt64 = 12345
        for _ in 0..<20_000 {
            var b: [UInt8] = []
            for _ in 0..<Int(x % 7) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17
                b.append(UInt8(truncatingIfNeeded: x))
            }
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            #expect(UTF8Check.isValid(b) == (String(validating: b, as: UTF8.self) != nil))
        }
    }
}
