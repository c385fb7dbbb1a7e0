import Glibc
import Testing
import CZlib
@testable import AssetPatchCore

/// Entries whose sizes sit near a multiple of a buffer the readers use: 16 KiB (libcurl's
/// write chunks), 256 KiB (the inflater's output, the zip reader's input, the follower's
/// reads), 1 MiB (file copies and the publisher's buffers). A buffer filled exactly to its end
/// looks like the end of the data to a careless loop: zero-filled files a few bytes past
/// 256 KiB once failed to install.
enum Boundaries {
    static let buffers = [16 << 10, 256 << 10, 1 << 20]
    static let deltas = [-1, 0, 1, 22, 160, 230, 4097]

    static var sizes: [Int] {
        var out = Set<Int>()
        for b in buffers {
            for k in b == 1 << 20 ? [1] : [1, 2] {
                for d in deltas { out.insert(k * b + d) }
            }
        }
        return out.sorted()
    }

    enum Kind: String, CaseIterable { case zeros, text, noise }

    /// `count` bytes of a kind: all zeros, word-like text, or pseudo-random bytes.
    static func content(_ kind: Kind, _ count: Int) -> [UInt8] {
        switch kind {
        case .zeros: return [UInt8](repeating: 0, count: count)
        case .noise: return noise(count, seed: 11)
        case .text:
            let words = ["asset", "patch", "level", "sound", "bank", "pack", "the", "of", "release", "resource"].map { Array($0.utf8) }
            var out: [UInt8] = []
            out.reserveCapacity(count + 16)
            var x: UInt64 = 7
            while out.count < count {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17
                out += words[Int(x % UInt64(words.count))]
                out.append(x & 0x30 == 0 ? 0x0A : 0x20)
            }
            return Array(out.prefix(count))
        }
    }
}

/// Raw deflate of `data` at `level`, in one zlib call with room for all of it.
func rawDeflate(_ data: [UInt8], level: Int32) -> [UInt8] {
    let z = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    z.initialize(to: z_stream())
    defer { deflateEnd(z); z.deallocate() }
    precondition(czlib_deflate_init_raw(z, level) == Z_OK)
    var out = [UInt8](repeating: 0, count: Int(deflateBound(z, UInt(data.count))) + 64)
    var input = data
    let produced: Int = input.withUnsafeMutableBytes { inp in
        out.withUnsafeMutableBytes { o in
            z.pointee.next_in = inp.baseAddress?.assumingMemoryBound(to: Bytef.self)
            z.pointee.avail_in = UInt32(inp.count)
            z.pointee.next_out = o.baseAddress!.assumingMemoryBound(to: Bytef.self)
            z.pointee.avail_out = UInt32(o.count)
            precondition(deflate(z, Z_FINISH) == Z_STREAM_END)
            return o.count - Int(z.pointee.avail_out)
        }
    }
    return Array(out.prefix(produced))
}

@Suite struct InflateBoundaryTests {
    /// Each size near each boundary, stored and deflated at levels 1, 6 and 9, with and without
    /// a data descriptor: the zip reader (256 KiB reads) and the entry decoder fed in chunks of
    /// several sizes (the differential receivers' path) yield exactly the original bytes.
    @Test(arguments: Boundaries.Kind.allCases)
    func everyReaderYieldsExactlyTheBytesNearEachBufferBoundary(_ kind: Boundaries.Kind) throws {
        let sizes = Boundaries.sizes
        let all = Boundaries.content(kind, sizes.last!)
        var failures: [String] = []
        for size in sizes {
            let data = Array(all.prefix(size))
            for level: Int32 in [0, 1, 6, 9] {
                let method: UInt16 = level == 0 ? 0 : 8
                let stored = level == 0 ? data : rawDeflate(data, level: level)
                var raw = RawZip()
                raw.entries.append(RawZip.Entry(name: Array("f.bin".utf8), data: stored, method: method, crc: RawZip.crc(data),
                                                uncompressed: UInt64(size), dataDescriptor: size % 2 == 0))
                try withZip(raw.bytes()) { path in
                    let zip = try ZipReader(path: path)
                    var got: [UInt8] = []
                    got.reserveCapacity(size)
                    do {
                        try zip.extract(zip.entries[0], buffers: ZipBuffers()) { got += $0 }
                        if got != data { failures.append("\(kind) \(size) level \(level): zip reader yields \(got.count) other bytes") }
                    } catch let e as AssetPatchError {
                        failures.append("\(kind) \(size) level \(level): zip reader: \(e.message)")
                    }
                }
                for chunk in [stored.count, 16384, 4093] {
                    let decoder = try EntryDecoder(method: method, size: UInt64(size))
                    let digest = try Digest(.sha256)
                    var count = 0
                    do {
                        var at = 0
                        while at < stored.count {
                            let n = min(chunk, stored.count - at)
                            try stored[at..<(at + n)].withUnsafeBytes { part in
                                try decoder.push(part) { digest.update($0); count += $0.count }
                            }
                            at += n
                        }
                        _ = try decoder.finish()
                        let want = try Digest(.sha256)
                        data.withUnsafeBytes { want.update($0) }
                        if count != size || digest.finalHex() != want.finalHex() {
                            failures.append("\(kind) \(size) level \(level) chunks of \(chunk): decoder yields \(count) other bytes")
                        }
                    } catch {
                        failures.append("\(kind) \(size) level \(level) chunks of \(chunk): \(error)")
                    }
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failures, first: \(failures.prefix(5))")
    }

    /// The whole-archive path (extracting behind the download, then from the verified archive)
    /// and the differential path install boundary-sized files the publisher wrote.
    @Test func boundarySizedFilesInstallByEveryRoute() throws {
        let repo = TempDir(), data = TempDir(), whole = TempDir()
        defer { repo.cleanup(); data.cleanup(); whole.cleanup() }
        func files(_ seed: UInt8) -> [(String, [UInt8])] {
            [("char.bin", [UInt8](repeating: seed, count: 262_304)),
             ("big/zeros.bin", [UInt8](repeating: seed, count: 524_448)),
             ("text.txt", Boundaries.content(.text, 262_144 + 160).map { $0 == 0x20 ? 0x20 + seed : $0 }),
             ("mib.txt", Boundaries.content(.text, (1 << 20) + 1).map { $0 == 0x0A ? 0x0A + seed : $0 }),
             ("edge.bin", [UInt8](repeating: seed, count: 16384 + 22))]
        }
        let url1 = try publishRelease(files(0), version: 1, repo: repo)
        for (differential, dir) in [("off", whole), ("auto", data)] {
            let c = try Client(dataDir: dir.path, bundleDir: nil)
            defer { c.close() }
            try c.set("manifest_url", url1)
            try c.set("differential", differential)
            #expect(try c.update(progress: nil), "release 1, differential=\(differential)")
            for (name, bytes) in files(0) { #expect(try FS.readFile(try c.resolve(name), limit: 4 << 20) == bytes, "\(name)") }
        }
        // Release 2 changes every file: the differential route fetches each by its range.
        let url2 = try publishRelease(files(1), version: 2, repo: repo)
        let c = try Client(dataDir: data.path, bundleDir: nil)
        defer { c.close() }
        try c.set("manifest_url", url2)
        try c.set("differential_max_percent", "100")
        var fetched: UInt64 = 0
        #expect(try c.update { p in
            if p.phase == .download { fetched = p.bytesTotal }
            return false
        })
        #expect(fetched > 0)
        for (name, bytes) in files(1) { #expect(try FS.readFile(try c.resolve(name), limit: 4 << 20) == bytes, "\(name)") }
    }
}
