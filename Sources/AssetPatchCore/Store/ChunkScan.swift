import Glibc

/// Chunk lists of files on disk that no index describes: the bundle's files, and those of
/// releases installed from a format-1 manifest (clients that updated before their repository
/// published heads). A file is cut the way the publisher cut the new release (the head's chunk
/// size) and each chunk hashed, so its chunks count like an installed release's chunked file.
///
/// Scanning reads the whole file, so the lists are cached in `DATA_DIR/chunk-scans/`, one file
/// per scanned path and chunk size, under the file's fingerprint (`BundleDigests.Fingerprint`:
/// size, times, inode, device); a file changed since is scanned again. As for bundle digests, a
/// list is cached only when the file had not changed for two seconds before it was scanned. A
/// list only proposes where chunks lie: the rebuilt file's hash checks every byte copied.
struct ChunkScan {
    let dir: String
    let chunker: Chunker
    let cancel: CancelToken
    /// Files scanned by this value (not found in the cache), for logs and tests.
    private(set) var scanned = 0
    var clock: () -> Int64 = wallClockNanos

    init(store: Store, chunker: Chunker, cancel: CancelToken) {
        dir = store.root + "/chunk-scans"
        self.chunker = chunker
        self.cancel = cancel
    }

    static let magic: [UInt8] = Array("APS1".utf8)

    /// The chunks of the regular file at `path`, in order; nil when it can't be read.
    mutating func chunks(of path: String) throws -> [ChunkRecord]? {
        guard let before = BundleDigests.Fingerprint(path) else { return nil }
        let cachePath = dir + "/" + ChunkScan.cacheName(path, chunker.averageSize)
        if let cached = read(cachePath, matching: before) { return cached }
        guard let file = try? File.openRead(path) else { return nil }
        file.adviseSequential()
        var out: [ChunkRecord] = []
        out.reserveCapacity(Int(before.size) / chunker.averageSize + 1)
        var sinceCheck = 0
        do {
            try chunker.chunks(of: file) { chunk in
                let d = try Digest(.sha256)
                d.update(chunk)
                out.append(ChunkRecord(sha256: d.finalBytes(), size: UInt32(chunk.count), compressedSize: 0))
                sinceCheck += chunk.count
                if sinceCheck >= 4 << 20 {
                    sinceCheck = 0
                    try cancel.check()
                }
            }
        } catch let e as AssetPatchError where e.status == .cancelled {
            throw e
        } catch {
            return nil
        }
        scanned += 1
        // Cached only if the file did not change while it was read, nor shortly before.
        if let after = BundleDigests.Fingerprint(path), after == before,
           clock() - max(before.mtimeNs, before.ctimeNs) >= BundleDigests.racyWindowNs {
            write(cachePath, scanned: path, before, out)
        }
        return out
    }

    static func cacheName(_ path: String, _ chunkSize: Int) -> String {
        Digest.sha256Hex(Array("\(chunkSize)\u{0}\(path)".utf8))
    }

    /// A cache file: `APS1`, the fingerprint (size, mtime ns, ctime ns, inode, device: 8 bytes
    /// each, little-endian), the chunk count and the scanned path's length (4 bytes each), the
    /// path, then per chunk its sha256 and size (4 bytes).
    private static func header(_ bytes: [UInt8]) -> (f: BundleDigests.Fingerprint, count: Int, path: String, end: Int)? {
        guard bytes.count >= 52, Array(bytes[0..<4]) == magic else { return nil }
        func word(_ at: Int, _ n: Int = 8) -> UInt64 { (0..<n).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << UInt64(8 * $1) } }
        let f = BundleDigests.Fingerprint(size: word(4), mtimeNs: Int64(bitPattern: word(12)), ctimeNs: Int64(bitPattern: word(20)),
                                          inode: word(28), device: word(36))
        let count = Int(word(44, 4)), length = Int(word(48, 4))
        guard length <= bytes.count - 52, let path = String(validating: bytes[52..<(52 + length)], as: UTF8.self) else { return nil }
        return (f, count, path, 52 + length)
    }

    private func read(_ cachePath: String, matching f: BundleDigests.Fingerprint) -> [ChunkRecord]? {
        guard let bytes = try? FS.readFile(cachePath, limit: 256 << 20, followLinks: false),
              let h = ChunkScan.header(bytes), h.f == f, bytes.count == h.end + h.count * 36 else { return nil }
        var out: [ChunkRecord] = []
        out.reserveCapacity(h.count)
        var total: UInt64 = 0
        for i in 0..<h.count {
            let at = h.end + i * 36
            let size = (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[at + 32 + $1]) << UInt32(8 * $1) }
            out.append(ChunkRecord(sha256: Array(bytes[at..<(at + 32)]), size: size, compressedSize: 0))
            total += UInt64(size)
        }
        return total == f.size ? out : nil
    }

    private func write(_ cachePath: String, scanned path: String, _ f: BundleDigests.Fingerprint, _ chunks: [ChunkRecord]) {
        var out = ChunkScan.magic
        let name = Array(path.utf8)
        out.reserveCapacity(52 + name.count + chunks.count * 36)
        func put(_ v: UInt64, _ bytes: Int = 8) { for i in 0..<bytes { out.append(UInt8(truncatingIfNeeded: v >> UInt64(8 * i))) } }
        put(f.size); put(UInt64(bitPattern: f.mtimeNs)); put(UInt64(bitPattern: f.ctimeNs)); put(f.inode); put(f.device)
        put(UInt64(chunks.count), 4)
        put(UInt64(name.count), 4)
        out += name
        for c in chunks {
            out += c.id.bytes
            put(UInt64(c.size), 4)
        }
        try? FS.makeDirectories(dir)
        try? FS.writeAtomically(cachePath, out)
    }

    /// Drops the cached lists of files that are gone or changed (a removed release's).
    static func prune(_ store: Store) {
        let dir = store.root + "/chunk-scans"
        for name in (try? FS.list(dir)) ?? [] {
            let path = dir + "/" + name
            guard let file = try? File.openRead(path), let head = try? file.preadExactly(min(4096 + 52, Int((try? file.size()) ?? 0)), at: 0,
                                                                                          what: "chunk scan"),
                  let h = header(head), BundleDigests.Fingerprint(h.path) == h.f else {
                try? FS.unlink(path)
                continue
            }
        }
    }
}
