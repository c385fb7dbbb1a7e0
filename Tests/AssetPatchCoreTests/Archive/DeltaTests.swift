import Glibc
import Testing
@testable import AssetPatchCore

/// Deltas (Archive/Delta.swift): what the encoder writes applies back to the target byte for
/// byte whatever the edit, costs what changed, and the applier takes no instruction that would
/// write past the target or read outside the base.
@Suite struct DeltaTests {
    static func text(_ count: Int, seed: UInt64) -> [UInt8] {
        let words = ["texture", "mesh", "sound", "level", "{\"id\": ", "},\n", "asset", "of"].map { Array($0.utf8) }
        var out: [UInt8] = []
        var x = seed | 1
        while out.count < count {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            out += words[Int(x % UInt64(words.count))] + [0x20]
        }
        return Array(out.prefix(count))
    }

    static func noise(_ count: Int, seed: UInt64) -> [UInt8] {
        var x = seed | 1
        return (0..<count).map { _ in
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            return UInt8(truncatingIfNeeded: x >> 24)
        }
    }

    static func encode(_ base: [UInt8], _ target: [UInt8]) -> [UInt8] {
        base.withUnsafeBytes { b in target.withUnsafeBytes { t in DeltaEncoder.encode(base: b, target: t) } }
    }

    /// The target `instructions` make from `base`, fed `piece` bytes at a time.
    static func apply(_ base: [UInt8], _ instructions: [UInt8], targetSize: Int, piece: Int = 1 << 20) throws -> [UInt8] {
        var out: [UInt8] = []
        let a = DeltaApplier(targetSize: UInt64(targetSize), baseSize: UInt64(base.count), readBase: { at, buffer in
            base.withUnsafeBytes { b in buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: b[Int(at)..<(Int(at) + buffer.count)])) }
        }, write: { out.append(contentsOf: $0) })
        var at = 0
        while at < instructions.count {
            let n = min(piece, instructions.count - at)
            try instructions[at..<(at + n)].withUnsafeBytes { try a.push($0) }
            at += n
        }
        try a.finish()
        return out
    }

    /// Every edit a pack sees, and the degenerate ones: the target comes back exactly.
    @Test func everyEditAppliesBack() throws {
        let base = DeltaTests.text(200_000, seed: 3) + DeltaTests.noise(100_000, seed: 4) + DeltaTests.text(60_000, seed: 5)
        var inPlace = base
        for k in 0..<20 { inPlace.replaceSubrange((k * 15_000 + 7)..<(k * 15_000 + 47), with: DeltaTests.noise(40, seed: UInt64(k + 9))) }
        var inserted = base
        inserted.insert(contentsOf: DeltaTests.noise(16_384, seed: 21), at: 123_457)
        var deleted = base
        deleted.removeSubrange(50_001..<70_003)
        let reordered = Array(base[240_000...]) + Array(base[100_000..<240_000]) + Array(base[..<100_000])
        let cases: [(String, [UInt8], [UInt8])] = [
            ("same", base, base), ("in place", base, inPlace), ("inserted", base, inserted), ("deleted", base, deleted),
            ("reordered", base, reordered), ("appended", base, base + DeltaTests.noise(5000, seed: 8)),
            ("unrelated", base, DeltaTests.noise(70_000, seed: 99)), ("empty base", [], DeltaTests.text(5000, seed: 1)),
            ("empty target", base, []), ("one byte", [1], [2]), ("block sized", Array(base[..<16]), Array(base[..<16])),
            ("minimum copy", Array(base[..<24]), Array(base[..<24]) + [7]),
        ]
        for (name, b, t) in cases {
            let d = DeltaTests.encode(b, t)
            #expect(try DeltaTests.apply(b, d, targetSize: t.count) == t, "\(name)")
            #expect(try DeltaTests.apply(b, d, targetSize: t.count, piece: 1) == t, "\(name), a byte at a time")
        }
    }

    /// What changed is what it costs: 20 edits of 40 bytes in a 360 KB file take a few
    /// hundred bytes each at most, a rearranged file a few instructions per moved run, and
    /// 16 KiB inserted about 16 KiB.
    @Test func costFollowsTheChange() throws {
        let base = DeltaTests.text(200_000, seed: 3) + DeltaTests.noise(100_000, seed: 4) + DeltaTests.text(60_000, seed: 5)
        var edited = base
        for k in 0..<20 { edited.replaceSubrange((k * 15_000 + 7)..<(k * 15_000 + 47), with: DeltaTests.noise(40, seed: UInt64(k + 9))) }
        let scattered = try RawDeflate.compress(DeltaTests.encode(base, edited), level: 9)
        #expect(scattered.count < 20 * 80, "20 edits of 40 bytes cost \(scattered.count) bytes")
        let reordered = Array(base[240_000...]) + Array(base[100_000..<240_000]) + Array(base[..<100_000])
        #expect(try RawDeflate.compress(DeltaTests.encode(base, reordered), level: 9).count < 64)
        var inserted = base
        inserted.insert(contentsOf: DeltaTests.noise(16_384, seed: 21), at: 123_457)
        let insertion = try RawDeflate.compress(DeltaTests.encode(base, inserted), level: 9).count
        #expect(insertion >= 16_384 && insertion < 16_384 + 200, "16 KiB of noise inserted cost \(insertion) bytes")
    }

    /// Instructions that would write past the target, read outside the base, or stop short
    /// are refused (`ERR_INTEGRITY`), whichever piece they arrive in.
    @Test func hostileInstructionsAreRefused() throws {
        let base = DeltaTests.text(1000, seed: 2)
        func refused(_ instructions: [UInt8], targetSize: Int) -> Bool {
            do {
                _ = try DeltaTests.apply(base, instructions, targetSize: targetSize)
                return false
            } catch let e as AssetPatchError {
                return e.status == .integrity
            } catch { return false }
        }
        var addPast: [UInt8] = []
        addPast.putVarint(11 << 1)
        addPast += [UInt8](repeating: 65, count: 11)
        #expect(refused(addPast, targetSize: 10))
        var copyOutside: [UInt8] = []
        copyOutside.putVarint(10 << 1 | 1)
        copyOutside.putVarint(DeltaCode.zigzag(995))
        #expect(refused(copyOutside, targetSize: 10))
        var copyBefore: [UInt8] = []
        copyBefore.putVarint(10 << 1 | 1)
        copyBefore.putVarint(DeltaCode.zigzag(-1))
        #expect(refused(copyBefore, targetSize: 10))
        #expect(refused([0], targetSize: 10), "an instruction of no bytes")
        var short: [UInt8] = []
        short.putVarint(5 << 1 | 1)
        short.putVarint(0)
        #expect(refused(short, targetSize: 10), "a target left short")
        #expect(refused(short + [3 << 1], targetSize: 10), "an instruction cut off")
        #expect(refused([UInt8](repeating: 0xFF, count: 12), targetSize: 10), "a number past 64 bits")
        // The same copy inside the base is taken.
        var fits: [UInt8] = []
        fits.putVarint(10 << 1 | 1)
        fits.putVarint(DeltaCode.zigzag(990))
        #expect(try DeltaTests.apply(base, fits, targetSize: 10) == Array(base[990...]))
    }

    /// A target of N bytes takes at most N / 12 + 2 instructions: bytes added one at a time
    /// (a system call each) are refused, what the encoder writes never is.
    @Test func instructionsAreBoundedByTheTargetsSize() throws {
        var ones: [UInt8] = []
        for _ in 0..<30 { ones.putVarint(1 << 1); ones.append(0x41) }
        #expect(throws: AssetPatchError.self) { _ = try DeltaTests.apply([], ones, targetSize: 30) }
        var one: [UInt8] = []
        one.putVarint(30 << 1)
        one += [UInt8](repeating: 0x41, count: 30)
        #expect(try DeltaTests.apply([], one, targetSize: 30) == [UInt8](repeating: 0x41, count: 30))
        // The encoder's worst case: edits every 25 bytes.
        let base = DeltaTests.noise(100_000, seed: 6)
        var target = base
        for at in stride(from: 0, to: target.count, by: 25) { target[at] ^= 0xFF }
        #expect(try DeltaTests.apply(base, DeltaTests.encode(base, target), targetSize: target.count) == target)
    }

    /// The delta files' URLs, like the archive's, are relative to each channel's directory:
    /// the same release offered by two channels is one release.
    @Test func deltaURLsAreNotPartOfWhatTheReleaseIs() throws {
        func head(_ prefix: String) throws -> JSON {
            try JSONParser.parse(Array("""
                {"format": 2, "version": 3, "archive": {"url": "\(prefix)archives/a.zip", "size": 10, "sha256": "00"},
                 "index": {"offset": 0, "deltas": [{"from": "11", "url": "\(prefix)deltas/d.delta", "size": 5}]}}
                """.utf8))
        }
        #expect(Manifest.contentDigest(try head("")) == Manifest.contentDigest(try head("../../")))
        var other = try head("")
        other = other.setting("index", other["index"]!.setting("deltas", .array([])))
        #expect(Manifest.contentDigest(try head("")) != Manifest.contentDigest(other))
    }

    /// Deltas are a shortcut: a head whose list a client can't read all of (a later format's
    /// entries, more than eight) keeps the entries it can, and is not refused.
    @Test func deltaEntriesAClientCannotReadArePassedOver() throws {
        let good = JSON.object([("from", .string(String(repeating: "a", count: 64))), ("url", .string("deltas/x.delta")),
                                ("size", .int(100)), ("page", .string(String(repeating: "b", count: 64))), ("page_size", .int(10))])
        let later = JSON.object([("from", .string("sha512:" + String(repeating: "a", count: 128))), ("url", .string("d"))])
        let list = try DeltaSource.decodeList(.array([later] + Array(repeating: good, count: 10)), source: "test")
        #expect(list.count == DeltaSource.most && list.allSatisfy { $0.size == 100 })
        #expect(try DeltaSource.decodeList(.array([later]), source: "test").isEmpty)
    }

    /// A delta page lists its targets in order and its deltas fill the file exactly.
    @Test func deltaPageRoundTripsAndRefusesWhatDoesNotAddUp() throws {
        let a = DeltaEntry(target: [UInt8](repeating: 1, count: 32), targetSize: 100, base: [UInt8](repeating: 9, count: 32), baseSize: 90, length: 7)
        let b = DeltaEntry(target: [UInt8](repeating: 2, count: 32), targetSize: 5, base: [UInt8](repeating: 8, count: 32), baseSize: 50, length: 3)
        let bytes = DeltaPage.encode([a, b])
        let entries = try DeltaPage.decode(bytes, fileSize: 40 + 10, pageSize: 40, source: "test")
        #expect(entries.map(\.offset) == [40, 47])
        #expect(entries.map(\.targetSize) == [100, 5])
        #expect(throws: AssetPatchError.self) { try DeltaPage.decode(bytes, fileSize: 40 + 11, pageSize: 40, source: "test") }
        #expect(throws: AssetPatchError.self) { try DeltaPage.decode(bytes, fileSize: 40 + 9, pageSize: 40, source: "test") }
        #expect(throws: AssetPatchError.self) { try DeltaPage.decode(DeltaPage.encode([b, a]), fileSize: 50, pageSize: 40, source: "test") }
        #expect(throws: AssetPatchError.self) { try DeltaPage.decode(Array(bytes.dropLast()), fileSize: 50, pageSize: 40, source: "test") }
    }
}
