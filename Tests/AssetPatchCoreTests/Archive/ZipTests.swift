import Glibc
import Testing
@testable import AssetPatchCore

/// Builds zip files byte by byte, for archives the writer never produces.
struct RawZip {
    struct Entry {
        var name: [UInt8]
        var data: [UInt8]          // as stored (already compressed for method 8)
        var method: UInt16 = 0
        var crc: UInt32
        var uncompressed: UInt64
        var flags: UInt16 = 0
        var externalMode: UInt32 = 0o100644
        var localOffsetOverride: UInt64? = nil
        var centralUncompressedOverride: UInt64? = nil
        var dataDescriptor = false
        var madeBy: UInt16 = 3 << 8 | 20
        var dosAttributes: UInt32 = 0
    }
    var entries: [Entry] = []

    static func crc(_ b: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in b {
            c ^= UInt32(byte)
            for _ in 0..<8 { c = (c >> 1) ^ (0xEDB8_8320 & (0 &- (c & 1))) }
        }
        return ~c
    }

    mutating func stored(_ name: String, _ data: [UInt8], mode: UInt32 = 0o100644) {
        entries.append(Entry(name: Array(name.utf8), data: data, crc: RawZip.crc(data), uncompressed: UInt64(data.count), externalMode: mode))
    }

    func bytes() -> [UInt8] {
        var out: [UInt8] = []
        var offsets: [UInt64] = []
        for e in entries {
            offsets.append(UInt64(out.count))
            let dd = e.dataDescriptor
            out.put32(0x0403_4b50); out.put16(20); out.put16(e.flags | (dd ? 8 : 0)); out.put16(e.method)
            out.put16(0); out.put16(0x21)
            out.put32(dd ? 0 : e.crc); out.put32(dd ? 0 : UInt32(e.data.count)); out.put32(dd ? 0 : UInt32(e.uncompressed))
            out.put16(UInt16(e.name.count)); out.put16(0)
            out += e.name
            out += e.data
            if dd { out.put32(0x0807_4b50); out.put32(e.crc); out.put32(UInt32(e.data.count)); out.put32(UInt32(e.uncompressed)) }
        }
        let cdStart = out.count
        for (i, e) in entries.enumerated() {
            out.put32(0x0201_4b50); out.put16(e.madeBy); out.put16(20); out.put16(e.flags | (e.dataDescriptor ? 8 : 0)); out.put16(e.method)
            out.put16(0); out.put16(0x21)
            out.put32(e.crc); out.put32(UInt32(e.data.count)); out.put32(UInt32(e.centralUncompressedOverride ?? e.uncompressed))
            out.put16(UInt16(e.name.count)); out.put16(0); out.put16(0); out.put16(0); out.put16(0)
            out.put32(e.externalMode << 16 | e.dosAttributes)
            out.put32(UInt32(e.localOffsetOverride ?? offsets[i]))
            out += e.name
        }
        let cdSize = out.count - cdStart
        let many = entries.count > 0xFFFE
        if many {  // ZIP64 end record and locator for the entry count
            let z64 = UInt64(out.count)
            out.put32(0x0606_4b50); out.put64(44); out.put16(45); out.put16(45); out.put32(0); out.put32(0)
            out.put64(UInt64(entries.count)); out.put64(UInt64(entries.count)); out.put64(UInt64(cdSize)); out.put64(UInt64(cdStart))
            out.put32(0x0706_4b50); out.put32(0); out.put64(z64); out.put32(1)
        }
        out.put32(0x0605_4b50); out.put16(0); out.put16(0)
        out.put16(many ? 0xFFFF : UInt16(entries.count)); out.put16(many ? 0xFFFF : UInt16(entries.count))
        out.put32(UInt32(cdSize)); out.put32(UInt32(cdStart)); out.put16(0)
        return out
    }
}

@Suite struct ZipTests {
    func extractAll(_ path: String) throws -> [String: [UInt8]] {
        let z = try ZipReader(path: path)
        var out: [String: [UInt8]] = [:]
        let buffers = ZipBuffers(size: 4096)
        for e in z.entries where !e.isDirectory {
            var data: [UInt8] = []
            try z.extract(e, buffers: buffers) { data += $0 }
            out[e.name] = data
        }
        return out
    }

    @Test func writerAndReaderRoundTrip() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let files: [(String, [UInt8])] = [("text.txt", Array(String(repeating: "hello zip ", count: 5000).utf8)),
                                          ("sub/noise.bin", noise(300_000)), ("empty", []), ("ünï.txt", Array("x".utf8))]
        for (n, b) in files { try dir.write("src/" + n, b) }
        let w = try ZipWriter(path: dir.path + "/out.zip")
        for (n, _) in files { try w.add(name: n, sourcePath: dir.path + "/src/" + n) }
        try w.finish()
        let z = try ZipReader(path: dir.path + "/out.zip")
        #expect(z.entries.first { $0.name == "text.txt" }?.method == 8)
        #expect(z.entries.first { $0.name == "sub/noise.bin" }?.method == 0)
        // An empty file is stored, no bytes (deflated it would take two), as zip stores it.
        let empty = try #require(z.entries.first { $0.name == "empty" })
        #expect(empty.method == 0 && empty.compressedSize == 0)
        let got = try extractAll(dir.path + "/out.zip")
        for (n, b) in files { #expect(got[n] == b, "\(n)") }
    }

    @Test func writesZip64WhenEntriesExceed65535() throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try dir.write("one", [1])
        let w = try ZipWriter(path: dir.path + "/many.zip")
        for i in 0..<65_600 { try w.add(name: "f/\(i)", sourcePath: dir.path + "/one") }
        try w.finish()
        let z = try ZipReader(path: dir.path + "/many.zip")
        #expect(z.entries.count == 65_600)
    }

    @Test func readsDataDescriptorsAndDeflate() throws {
        var raw = RawZip()
        let plain = Array(String(repeating: "abc", count: 1000).utf8)
        let deflated = try deflateRaw(plain)
        raw.entries.append(.init(name: Array("d.txt".utf8), data: deflated, method: 8, crc: RawZip.crc(plain),
                                 uncompressed: UInt64(plain.count), dataDescriptor: true))
        raw.stored("s.txt", Array("stored".utf8))
        try withZip(raw.bytes()) { path in
            let got = try extractAll(path)
            #expect(got["d.txt"] == plain)
            #expect(got["s.txt"] == Array("stored".utf8))
        }
    }

    @Test func refusesInflatingPastTheDeclaredSize() throws {
        var raw = RawZip()
        let plain = [UInt8](repeating: 0, count: 1_000_000)
        raw.entries.append(.init(name: Array("bomb".utf8), data: try deflateRaw(plain), method: 8, crc: RawZip.crc(plain),
                                 uncompressed: 1000, dataDescriptor: true))
        try withZip(raw.bytes()) { path in
            #expect(statusOf { _ = try extractAll(path) } == .archive)
        }
    }

    @Test func crcMismatchIsAnIntegrityError() throws {
        var raw = RawZip()
        raw.stored("a", Array("data".utf8))
        raw.entries[0].crc ^= 1
        try withZip(raw.bytes()) { path in
            #expect(statusOf { _ = try extractAll(path) } == .integrity)
        }
    }

    @Test func refusesOverlappingEntries() throws {
        // "b" is a real entry; "a" is stored with data that spans b's local header and data.
        var inner = RawZip()
        inner.stored("b", Array("payload".utf8))
        let innerBytes = inner.bytes()
        let localB = Array(innerBytes[0..<(30 + 1 + 7)])
        var raw = RawZip()
        raw.stored("a", localB)
        raw.stored("b", Array("payload".utf8))
        raw.entries[1].localOffsetOverride = UInt64(30 + 1)  // b's local header lies inside a's data
        try withZip(raw.bytes()) { path in
            #expect(statusOf { _ = try ZipReader(path: path) } == .archive)
        }
    }

    @Test(arguments: ["../x", "/abs", "a\\b", "C:/x", "a//b"])
    func refusesUnsafeEntryNames(_ name: String) throws {
        var raw = RawZip()
        raw.stored(name, [1])
        try withZip(raw.bytes()) { path in
            #expect(statusOf { _ = try ZipReader(path: path) } == .archive)
        }
    }

    @Test func refusesLinksDevicesEncryptionAndUnknownMethods() throws {
        for mutate in [{ (r: inout RawZip) in r.entries[0].externalMode = 0o120777 },
                       { (r: inout RawZip) in r.entries[0].externalMode = 0o020644 },
                       // A link whatever creator the entry claims (MS-DOS 0, NTFS 10, macOS 19), and
                       // Windows' reparse-point attribute (links, junctions).
                       { (r: inout RawZip) in r.entries[0].externalMode = 0o120777; r.entries[0].madeBy = 0 << 8 | 20 },
                       { (r: inout RawZip) in r.entries[0].externalMode = 0o120777; r.entries[0].madeBy = 10 << 8 | 20 },
                       { (r: inout RawZip) in r.entries[0].externalMode = 0o120777; r.entries[0].madeBy = 19 << 8 | 20 },
                       { (r: inout RawZip) in r.entries[0].externalMode = 0; r.entries[0].madeBy = 10 << 8 | 20; r.entries[0].dosAttributes = 0x420 },
                       { (r: inout RawZip) in r.entries[0].flags = 1 },
                       { (r: inout RawZip) in r.entries[0].method = 14 }] {
            var raw = RawZip()
            raw.stored("x", [1, 2, 3])
            mutate(&raw)
            try withZip(raw.bytes()) { path in
                #expect(statusOf { _ = try ZipReader(path: path) } == .archive)
            }
        }
    }

    /// Plain Windows entries (archive attribute, no Unix mode) and long but legal names are
    /// fine; a component past 255 bytes (NAME_MAX) is an unsafe name, not a failed write.
    @Test func acceptsWindowsEntriesAndRefusesComponentsPastNameMax() throws {
        var windows = RawZip()
        windows.stored("a/b.txt", [1, 2, 3])
        windows.entries[0].madeBy = 0 << 8 | 20
        windows.entries[0].externalMode = 0
        windows.entries[0].dosAttributes = 0x20
        windows.stored(String(repeating: "n", count: 255), [4])
        try withZip(windows.bytes()) { path in
            let count = try ZipReader(path: path).entries.count
            #expect(count == 2)
        }
        var long = RawZip()
        long.stored("dir/" + String(repeating: "n", count: 256), [1])
        try withZip(long.bytes()) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }
        #expect(!ResourceName.isValid(String(repeating: "é", count: 128)))  // 256 bytes
        #expect(ResourceName.isValid(String(repeating: "a/", count: 100) + String(repeating: "b", count: 255)))
    }

    @Test func refusesDuplicateNamesAndHeaderDisagreement() throws {
        var dup = RawZip()
        dup.stored("x", [1])
        dup.stored("x", [2])
        try withZip(dup.bytes()) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }
        var lie = RawZip()
        lie.stored("x", [1, 2, 3])
        lie.entries[0].centralUncompressedOverride = 2
        try withZip(lie.bytes()) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }
    }

    @Test func refusesGarbageAndTruncation() throws {
        try withZip(noise(1000)) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }
        try withZip([]) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }
        var raw = RawZip()
        raw.stored("x", noise(5000))
        let whole = raw.bytes()
        try withZip(Array(whole[0..<(whole.count - 30)])) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }
    }
}

/// Writes `bytes` to a temporary zip file for `body`.
func withZip(_ bytes: [UInt8], _ body: (String) throws -> Void) throws {
    let dir = TempDir()
    defer { dir.cleanup() }
    try dir.write("a.zip", bytes)
    try body(dir.path + "/a.zip")
}

/// Raw deflate through the writer's zlib path (a one-entry zip, read back).
func deflateRaw(_ data: [UInt8]) throws -> [UInt8] {
    let dir = TempDir()
    defer { dir.cleanup() }
    var text = data
    if text.isEmpty { text = [0] }
    try dir.write("in", text)
    let w = try ZipWriter(path: dir.path + "/t.zip")
    try w.add(name: "in", sourcePath: dir.path + "/in")
    try w.finish()
    let z = try ZipReader(path: dir.path + "/t.zip")
    let e = z.entries[0]
    return try z.file.preadExactly(Int(e.compressedSize), at: e.dataOffset, what: "data")
}

@Suite struct HostileZipTests {
    @Test func refusesNamesWithNULOrInvalidUTF8() throws {
        for name: [UInt8] in [[0x61, 0x00, 0x62], [0x61, 0xFF, 0x62], [0xC0, 0xAF], [0xED, 0xA0, 0x80]] {
            var raw = RawZip()
            raw.entries.append(.init(name: name, data: [1], crc: RawZip.crc([1]), uncompressed: 1))
            try withZip(raw.bytes()) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }
        }
    }

    @Test func refusesBogusZip64Fields() throws {
        // Sizes of 0xFFFFFFFF without a ZIP64 extra field.
        var raw = RawZip()
        raw.stored("x", [1, 2, 3])
        var bytes = raw.bytes()
        let cd = bytes.count - 22 - (46 + 1)
        for i in 0..<4 { bytes[cd + 20 + i] = 0xFF; bytes[cd + 24 + i] = 0xFF }
        try withZip(bytes) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }

        // A ZIP64 locator pointing past the end, and one whose record claims 2^40 entries.
        var base = RawZip()
        base.stored("y", [4])
        let plain = base.bytes()
        let eocd = Array(plain.suffix(22)), body = Array(plain.dropLast(22))
        var pastEnd = body
        pastEnd.put32(0x0706_4b50); pastEnd.put32(0); pastEnd.put64(1 << 40); pastEnd.put32(1)
        pastEnd += eocd
        try withZip(pastEnd) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }

        var huge = body
        let z64 = UInt64(huge.count)
        huge.put32(0x0606_4b50); huge.put64(44); huge.put16(45); huge.put16(45); huge.put32(0); huge.put32(0)
        huge.put64(1 << 40); huge.put64(1 << 40); huge.put64(UInt64(47)); huge.put64(UInt64(body.count - 47))
        huge.put32(0x0706_4b50); huge.put32(0); huge.put64(z64); huge.put32(1)
        var e = eocd
        e[8] = 0xFF; e[9] = 0xFF; e[10] = 0xFF; e[11] = 0xFF
        huge += e
        try withZip(huge) { path in #expect(statusOf { _ = try ZipReader(path: path) } == .archive) }
    }

    @Test func hundredThousandTinyEntriesParseWithoutBlowingUp() throws {
        var raw = RawZip()
        for i in 0..<100_000 { raw.stored("e/\(i)", [UInt8(i & 0xFF)]) }
        try withZip(raw.bytes()) { path in
            let z = try ZipReader(path: path)
            #expect(z.entries.count == 100_000)
        }
    }

    @Test func hundredThousandEntriesNotInTheManifestAreRefusedBeforeExtraction() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        var raw = RawZip()
        raw.stored("ok.txt", Array("ok".utf8))
        for i in 0..<100_000 { raw.stored("spam/\(i)", [1]) }
        let zip = raw.bytes()
        let sha = Digest.sha256Hex(zip)
        try repo.write("archives/\(sha).zip", zip)
        let m = Manifest(kind: .format1, package: "t", version: 1, label: nil, created: nil, expires: nil, minAppVersion: nil,
                         archiveURL: "archives/\(sha).zip", archiveSize: UInt64(zip.count), archiveDigest: sha,
                         files: [ManifestFile(path: "ok.txt", size: 2, sha256: Digest.sha256Hex(Array("ok".utf8)))],
                         plugins: [], signatureVerified: false, payload: [])
        try repo.write("manifest.json", m.toJSON().serialized())
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", URLs.fileURL(forPath: repo.path + "/manifest.json"))
        #expect(statusOf { _ = try c.update(progress: nil) } == .archive)
        #expect(try FS.list(data.path + "/staging").isEmpty)
    }

    @Test func declaredSizesOverMaxReleaseBytesAreRefused() throws {
        let repo = TempDir(), data = TempDir()
        defer { repo.cleanup(); data.cleanup() }
        let url = try publishRelease([("big.bin", noise(100_000))], version: 1, repo: repo)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", url)
        try c.set("max_release_bytes", "50000")
        #expect(statusOf { _ = try c.update(progress: nil) } == .archive)
        #expect(try FS.list(data.path + "/downloads").isEmpty, "refused before any download")
    }
}
