import Glibc

/// The delta file of a new release against an earlier one (`DeltaSource`, docs/format.md
/// "Deltas"): for each file of the new release whose path the earlier release has with other
/// bytes, the delta from the old bytes (read from the earlier archive in the repository) to the
/// new (`DeltaEncoder`), raw-deflated, kept when it takes at most three quarters of what the
/// file's bytes take in the new archive. Written as `deltas/<sha256>.delta`.
package enum DeltaBuilder {
    /// A delta is kept when it is at most this share (in quarters) of the file's bytes in the
    /// new archive (its local header and data): a client compares it with what else the file
    /// would cost, and less than this is rarely worth a second format.
    static let keepQuarters: UInt64 = 3
    /// Files smaller than this travel whole: a delta's entry in the page (70 bytes) and its
    /// instructions would not pay.
    static let smallest: UInt64 = 128
    /// Files from this size have no delta: the encoder's table counts base offsets in 32 bits.
    static let largest: UInt64 = 1 << 31

    package struct Built {
        package var source: DeltaSource
        package var deltas: Int
        /// The new files' bytes in the archive, and their deltas' bytes (the page included).
        package var archiveBytes: UInt64
        package var deltaBytes: UInt64
    }

    /// The delta file from the release `old` (its format-1 manifest and archive in `repo`) to
    /// the new release's `files`, read from `source`; nil when no file has a delta worth
    /// keeping, or the old archive is not in the repository (a working copy pulled from a
    /// bucket keeps none). `dryRun`: built and measured, not written.
    package static func build(repo: String, old: Manifest, files: [ManifestFile], source: String, dryRun: Bool) throws -> Built? {
        let archivePath = repo + "/archives/\(old.archiveDigest).zip"
        guard FS.exists(archivePath) else { return nil }
        let zip = try ZipReader(path: archivePath)
        let oldByPath = Dictionary(old.files.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        let entries = Dictionary(try zip.fileEntries(matching: old.files).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        let buffers = ZipBuffers()
        var made: [(entry: DeltaEntry, body: [UInt8])] = []
        var seen = Set<String>()
        var archiveBytes: UInt64 = 0
        // The old bytes, one file at a time (a dry run writes nothing in the repository).
        let scratch = (dryRun ? FS.temporaryDirectory : repo + "/archives") + "/.delta-base-\(getpid())"
        defer { try? FS.unlink(scratch) }
        for f in files {
            guard let l = f.location, let o = oldByPath[f.path], o.sha256 != f.sha256, let entry = entries[f.path],
                  f.size >= smallest, f.size < largest, o.size > 0, o.size < largest, !seen.contains(f.sha256) else { continue }
            let stored = l.dataOffset + l.compressedSize - l.headerOffset
            // The old bytes, from the old archive (checked against their sha256 on the way).
            let out = try File.open(scratch, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: 0o600)
            let digest = try Digest(.sha256)
            try zip.extract(entry, buffers: buffers) { chunk in
                try out.write(chunk)
                digest.update(chunk)
            }
            guard digest.finalHex() == o.sha256 else {
                throw AssetPatchError(.integrity, "\(archivePath): \"\(f.path)\" does not match version \(old.version)'s sha256")
            }
            let instructions = try Mapped.both(out, size: o.size, source + "/" + f.path, size: f.size) { base, target in
                // The bytes the archive holds, or the delta would fail on every client.
                let d = try Digest(.sha256)
                d.update(target)
                guard d.finalHex() == f.sha256 else { throw AssetPatchError(.io, "\(source)/\(f.path) changed while it was published") }
                return DeltaEncoder.encode(base: base, target: target)
            }
            let body = try RawDeflate.compress(instructions, level: 9)
            guard UInt64(body.count) + 70 <= stored * keepQuarters / 4 else { continue }
            seen.insert(f.sha256)
            made.append((DeltaEntry(target: Hex.decode(f.sha256)!, targetSize: f.size, base: Hex.decode(o.sha256)!, baseSize: o.size,
                                    length: UInt64(body.count)), body))
            archiveBytes += stored
        }
        guard !made.isEmpty else { return nil }
        made.sort { $0.entry.target.lexicographicallyPrecedes($1.entry.target) }
        let page = try IndexPage.seal(DeltaPage.encode(made.map(\.entry)))
        var bytes = page.stored
        for m in made { bytes += m.body }
        let sha = Digest.sha256Hex(bytes)
        let name = "deltas/\(sha).delta"
        if !dryRun {
            try FS.makeDirectories(repo + "/deltas")
            try FS.writeAtomically(repo + "/" + name, bytes)
        }
        return Built(source: DeltaSource(from: old.archiveDigest, url: name, size: UInt64(bytes.count), page: page.ref),
                     deltas: made.count, archiveBytes: archiveBytes, deltaBytes: UInt64(bytes.count))
    }

    /// The earlier releases a publish makes deltas from, newest first: the one `channel` offers
    /// now, then the history's newest below `version`; at most `count`, each from its format-1
    /// manifest in the history.
    package static func earlier(repo: String, channel: String, below version: Int64, count: Int) -> [Manifest] {
        guard count > 0 else { return [] }
        var versions: [Int64] = []
        if let offered = (try? ChannelManifests.offered(repo: repo, channel: channel)) ?? nil, offered.version < version {
            versions.append(offered.version)
        }
        let history = ((try? FS.list(repo + "/history")) ?? []).compactMap { Int64($0) }.filter { $0 < version }.sorted(by: >)
        for v in history where !versions.contains(v) { versions.append(v) }
        let marked = ChannelManifests.unchecked(repo: repo)
        var out: [Manifest] = []
        for v in versions where out.count < count && !marked.contains(v) {
            let path = repo + "/history/\(v)/manifest.json"
            guard let bytes = try? FS.readFile(path, limit: 256 << 20), let m = try? Manifest.decode(bytes, source: path),
                  m.kind == .format1 else { continue }
            out.append(m)
        }
        return out
    }
}

/// Two files mapped read-only for the encoder (a file of a gigabyte is never read into memory).
private enum Mapped {
    static func both<T>(_ a: File, size aSize: UInt64, _ bPath: String, size bSize: UInt64,
                        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> T) throws -> T {
        let b = try File.openRead(bPath)
        guard try b.size() == bSize else { throw AssetPatchError(.io, "\(bPath) changed while it was published") }
        let pa = try map(a, aSize), pb = try map(b, bSize)
        defer {
            if aSize > 0 { munmap(UnsafeMutableRawPointer(mutating: pa.baseAddress), Int(aSize)) }
            if bSize > 0 { munmap(UnsafeMutableRawPointer(mutating: pb.baseAddress), Int(bSize)) }
        }
        return try body(pa, pb)
    }

    static func map(_ f: File, _ size: UInt64) throws -> UnsafeRawBufferPointer {
        guard size > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        guard let p = mmap(nil, Int(size), PROT_READ, MAP_PRIVATE, f.fd, 0), p != MAP_FAILED else {
            throw AssetPatchError(.io, "\(f.path): mmap failed (errno \(errno))")
        }
        return UnsafeRawBufferPointer(start: p, count: Int(size))
    }
}
