import Glibc

extension Installer {
    /// Most bytes one read or write of a rebuild moves: runs of chunks that lie next to each
    /// other in one file on disk are copied together.
    static let rebuildRunBytes = 1 << 20
    /// A rebuild starts writing back what it wrote every this many bytes.
    static let writebackBytes: UInt64 = 16 << 20

    /// For each chunk `files` take from the update's chunk directory (by `chunks`' key: sha256
    /// hex, and a linked chunk's compressed bytes by `ChunkPlanner.linkedKey`), the last file (by
    /// number) that takes it: once that file is rebuilt the chunk is dropped.
    static func lastUses(_ files: [ChunkedFile]) -> [String: Int] {
        var last: [String: Int] = [:]
        for (i, f) in files.enumerated() {
            for (record, source) in f.chunks {
                switch source {
                case .local: continue
                case let .linked(offset): last[ChunkPlanner.linkedKey(record.id, offset)] = i
                case .fetched, .archive: break
                }
                last[record.id.hex] = i  // a linked chunk is kept decoded under it, for later places
            }
        }
        return last
    }

    /// Rebuilds each of `files` into `dir` in order, as `place` would, each handed to the sync
    /// behind once it is whole: run beside the fetch of the update's chunks and whole files, so
    /// that `place` finds them rebuilt and only links them. A file's chunks fetched now are
    /// waited for in `arriving` (what the chunk fetch keeps, by `ChunkPlanner.key`), so each
    /// file is rebuilt as soon as its chunks are there, while later ones arrive. `direct`: where
    /// chunks fetched now were written in place (`DirectChunks`).
    func rebuildAhead(_ files: [ChunkedFile], arriving: Arrivals<String, String>, into dir: String, direct: DirectChunks? = nil) throws {
        var chunks = arriving.all
        let lastUses = Installer.lastUses(files)
        for i in files.indices {
            for (record, source) in files[i].chunks {
                var keys: [String]
                switch source {
                case .local: continue
                // Kept by an earlier attempt, or fetched now for an earlier place: written in
                // place there, or kept as a chunk file (decoded by the rebuild that took it first).
                case .fetched:
                    keys = [record.id.hex]
                    if let (offset, place) = direct?.firstPlace(of: record.id) {
                        keys.append(DirectChunks.key(offset))
                        // Kept compressed: the rebuild of its first place (earlier in this file) decodes it.
                        if place.linked { keys.append(ChunkPlanner.linkedKey(record.id, offset)) }
                    }
                // Written in place, or kept as a chunk file.
                case let .archive(offset): keys = [DirectChunks.key(offset), record.id.hex]
                // Also kept compressed, or decoded by an earlier file's rebuild.
                case let .linked(offset): keys = [DirectChunks.key(offset), ChunkPlanner.linkedKey(record.id, offset), record.id.hex]
                }
                guard !keys.contains(where: { chunks[$0] != nil }) else { continue }
                // Not there once the fetch is done: the rebuild says it was planned but not fetched.
                if let (key, path) = try arriving.wait(forAny: keys, cancel: cancel) { chunks[key] = path }
            }
            // Rebuilt first: an optional chain would skip its argument without a sync behind.
            let rebuilt = try rebuild(files, i, into: dir, chunks: &chunks, lastUses: lastUses, direct: direct) { _ in }
            syncBehind?.submit(rebuilt)
        }
    }

    /// Rebuilds chunked file `number` of `files` into `dir` (the update's fetched files) under
    /// its sha256, as if it had been fetched whole, then drops the chunks no later file takes:
    /// the chunks and the files made of them are never on disk together (a 97 MiB group took
    /// 194 MiB at the end of its fetch), and an attempt after an interruption finds the file
    /// among the fetched ones (hashed again) instead of its chunks. Returns its path there.
    func rebuild(_ files: [ChunkedFile], _ number: Int, into dir: String, chunks: inout [String: String],
                 lastUses: [String: Int], direct: DirectChunks? = nil, progress: (UInt64) -> Void) throws -> String {
        let f = files[number]
        let kept = dir + "/" + f.file.sha256
        // The same content at another path, rebuilt before, is the answer; the chunks it
        // planned for this place (all of them, `.fetched`) are dropped all the same.
        if !FS.exists(kept) {
            try FS.makeDirectories(dir)
            // Chunks fetched now may be in it already (`DirectChunks`), and an interrupted
            // attempt's: a cancelled rebuild leaves it for the next attempt, which hashes them again.
            let temp = DirectChunks.partialPath(f.file, in: dir)
            do {
                try rebuild(f, to: temp, chunks: &chunks, direct: direct, progress: progress)
                try FS.rename(temp, kept)
            } catch {
                if !cancel.isCancelled { try? FS.unlink(temp) }
                throw error
            }
        }
        for (record, source) in f.chunks {
            var keys = [record.id.hex]
            if case let .linked(offset) = source { keys.append(ChunkPlanner.linkedKey(record.id, offset)) }
            for key in keys where lastUses[key] == number {
                if let path = chunks.removeValue(forKey: key) { try? FS.unlink(path) }
            }
        }
        return kept
    }

    /// Writes a chunked file to `target` from its chunks, in order: chunks that
    /// lie one after another in a file on disk (an installed release's, at their offsets) are
    /// copied as one run; a chunk fetched by an earlier, interrupted attempt is hashed again
    /// before it is used; one fetched now was checked as it arrived, and one written in place
    /// (`DirectChunks.key` among `chunks`) is only read back for the whole file's hash. Whatever
    /// else `target` held (an interrupted attempt's bytes) is written over or cut off. The whole file is hashed
    /// as it is written and must match the index: bytes on disk that changed since they were
    /// installed show there and raise `DifferentialFallback` (the whole archive settles it),
    /// never a wrong file. Memory: three runs (one read and written while the others are hashed).
    func rebuild(_ f: ChunkedFile, to target: String, chunks fetched: inout [String: String], direct: DirectChunks? = nil,
                 progress: (UInt64) -> Void) throws {
        // Read and write: a linked chunk decodes after the bytes written before it.
        let out = try DirectChunks.openWritable(target, O_RDWR)
        let largest = f.records.reduce(0) { max($0, Int($1.size)) }
        // The whole file is hashed on another thread while the next run is read and written.
        let whole = try BackgroundDigest(buffers: 3, size: max(Installer.rebuildRunBytes, largest))
        defer { whole.stop() }
        var written: UInt64 = 0
        var open: [String: File] = [:]
        var usedLocal = false

        func file(_ path: String, failing: DifferentialFallback) throws -> File {
            if let f = open[path] { return f }
            guard let f = try? File.openRead(path) else { throw failing }
            if open.count > 16 { open.removeAll() }
            f.adviseSequential()
            open[path] = f
            return f
        }
        /// Bytes placed in one of `whole`'s buffers, not yet written: chunks go to the output
        /// and its hash a buffer at a time (a file of 8 KiB chunks cost a write and a wake of
        /// the hashing thread per chunk).
        var filling: (buffer: UnsafeMutableRawBufferPointer, count: Int)?
        /// Room for `count` more bytes after those placed: fill it, then `placed(count)`.
        func room(_ count: Int) throws -> UnsafeMutableRawBufferPointer {
            if let (buffer, used) = filling, used + count <= buffer.count {
                return UnsafeMutableRawBufferPointer(rebasing: buffer[used..<(used + count)])
            }
            try flush()
            let buffer = whole.buffer()
            filling = (buffer, 0)
            return UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
        }
        func placed(_ count: Int) { filling!.count += count }
        /// Writes the bytes placed at the output's end and hands them to the whole file's hash.
        func flush() throws {
            guard let (buffer, count) = filling else { return }
            filling = nil
            try out.pwrite(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), at: written)
            hashed(buffer, count)
        }
        /// `count` bytes of `buffer`, at the output's end, go to the whole file's hash.
        func hashed(_ buffer: UnsafeMutableRawBufferPointer, _ count: Int) {
            whole.submit(buffer, count: count)
            written += UInt64(count)
            if written / Installer.writebackBytes != (written - UInt64(count)) / Installer.writebackBytes {
                out.startWriteback()  // a large file's pages go to disk as it grows, not all at the end
            }
            progress(written)
        }
        /// Copies `count` bytes of `path` at `offset` to the output; `check`: the chunk they
        /// must hash to (nil: the whole file's hash checks them).
        func copy(_ path: String, _ offset: UInt64, _ count: Int, check: ChunkRecord?) throws {
            let failing = DifferentialFallback(message: "\(path): \(count) bytes at \(offset) no longer match the chunks of \"\(f.file.path)\" they were planned as")
            let chunk = try room(count)
            guard try file(path, failing: failing).pread(into: chunk, at: offset) == count else { throw failing }
            if let check {
                let d = try Digest(.sha256)
                d.update(UnsafeRawBufferPointer(chunk))
                guard ChunkID(d.finalBytes()) == check.id else { throw failing }
            }
            placed(count)
        }

        /// A linked chunk: copied when it was decoded as it arrived; otherwise its compressed
        /// bytes (fetched now or by an earlier attempt) decoded after the 32 KiB written before
        /// it, checked against its sha256, written, and kept decoded (an attempt after an
        /// interruption copies it), its compressed bytes dropped either way. Bytes that do not
        /// decode to the chunk are the server's or the disk's: the whole archive settles it.
        func linked(_ record: ChunkRecord, at offset: UInt64) throws {
            let key = ChunkPlanner.linkedKey(record.id, offset)
            if fetched[key] == nil, let decoded = fetched[record.id.hex] {
                return try copy(decoded, 0, Int(record.size), check: record)
            }
            guard let path = fetched[key] else {
                throw AssetPatchError(.internal, "a chunk of \"\(f.file.path)\" was planned but not fetched")
            }
            let bad = { (why: String) in
                let what = "\(path): the chunk of \"\(f.file.path)\" at archive offset \(offset) \(why)"
                // Its history holds bytes on disk copied unchecked (the whole file's hash checks
                // them): they may be what changed. The whole archive settles it either way.
                if usedLocal { return DifferentialFallback(message: what + "; the bytes on disk before it may have changed") }
                try? FS.unlink(path)
                return DifferentialFallback(message: what, badBytes: true)
            }
            guard let stored = try? FS.readFile(path, limit: Int(record.compressedSize), followLinks: false),
                  stored.count == Int(record.compressedSize) else { throw bad("is missing or not \(record.compressedSize) bytes") }
            try flush()  // its history is read back from the output
            let back = min(written, UInt64(ChunkDecoder.historyBytes))
            var history = [UInt8](repeating: 0, count: Int(back))
            if back > 0 {
                guard try history.withUnsafeMutableBytes({ try out.pread(into: $0, at: written - back) }) == Int(back) else {
                    throw AssetPatchError(.io, "\(target): \(back) bytes written before could not be read back")
                }
            }
            let bytes: [UInt8]
            do {
                bytes = try stored.withUnsafeBytes { c in
                    try history.withUnsafeBytes { h in try ChunkDecoder.decode(c, method: f.method, chunk: record, history: h) }
                }
            } catch {
                throw bad("does not decode to its sha256 (\(error))")
            }
            let kept = (path.beforeLastSlash ?? ".") + "/" + record.id.hex
            try KeptChunk.write(bytes, at: kept)
            fetched[record.id.hex] = kept  // later places of the same chunk copy it
            try? FS.unlink(path)
            let place = try room(bytes.count)
            bytes.withUnsafeBytes { place.copyMemory(from: $0) }
            placed(bytes.count)
        }

        /// A chunk written in place: read back and handed to the whole file's hash.
        func inPlace(_ count: Int) throws {
            try flush()
            var left = count
            while left > 0 {
                let buffer = whole.buffer()
                let n = min(left, buffer.count)
                guard try out.pread(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]), at: written) == n else {
                    throw AssetPatchError(.io, "\(target): \(n) bytes written in place at \(written) could not be read back")
                }
                hashed(buffer, n)
                left -= n
            }
        }

        var run: (path: String, offset: UInt64, count: Int)?
        func endRun() throws {
            if let r = run { try copy(r.path, r.offset, r.count, check: nil) }
            run = nil
        }
        for (record, source) in f.chunks {
            try cancel.check()
            let size = Int(record.size)
            switch source {
            case let .local(index, offset):
                usedLocal = true
                let path = f.localFiles[Int(index)]
                if let r = run, r.path == path, r.offset + UInt64(r.count) == offset, r.count + size <= Installer.rebuildRunBytes {
                    run = (path, r.offset, r.count + size)
                } else {
                    try endRun()
                    run = (path, offset, size)
                }
            case let .archive(offset) where fetched[DirectChunks.key(offset)] != nil,
                 let .linked(offset) where fetched[DirectChunks.key(offset)] != nil:
                try endRun()
                try inPlace(size)
            case let .linked(offset):
                try endRun()
                try linked(record, at: offset)
            case .fetched, .archive:
                try endRun()
                if let path = fetched[record.id.hex] {
                    // A chunk fetched now was decoded and checked as it arrived; one an earlier
                    // attempt kept is checked again.
                    try copy(path, 0, size, check: source == .fetched ? record : nil)
                } else if source == .fetched, let (offset, place) = direct?.firstPlace(of: record.id), fetched[DirectChunks.key(offset)] != nil {
                    // Written in place at its first place: in a file rebuilt before, or earlier in this one.
                    try copy(place.path == target ? target : DirectChunks.holder(of: place), place.offset, size, check: record)
                } else {
                    throw AssetPatchError(.internal, "a chunk of \"\(f.file.path)\" was planned but not fetched")
                }
            }
        }
        try endRun()
        try flush()
        if try out.size() != written { try out.truncate(to: written) }
        if fchmod(out.fd, 0o444) != 0 { throw ioError("chmod", target) }
        out.startWriteback()
        let sha = Hex.encode(whole.finish())
        guard written == f.file.size, sha == f.file.sha256 else {
            let what = "\(target): rebuilt from its chunks, \"\(f.file.path)\" has sha256 \(sha) (\(written) bytes), the index says \(f.file.sha256) (\(f.file.size))"
            if usedLocal { throw DifferentialFallback(message: what + "; the bytes on disk it copied changed") }
            throw AssetPatchError(.integrity, what)
        }
    }
}

/// A chunk kept in an update's chunk directory (`<sha256>`, or a linked chunk's compressed
/// bytes, `<sha256>.<offset>`).
enum KeptChunk {
    /// Keeps a chunk's bytes at `path` (read-only, renamed into place; not synced: a chunk a
    /// power cut damaged fails its check where it is used, and the update then downloads the
    /// whole archive), unless a chunk is there already.
    static func write(_ bytes: [UInt8], at path: String) throws {
        guard !FS.isRegularFile(path) else { return }
        let temp = FS.tempName(for: path)
        do {
            let out = try File.open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o444)
            try out.write(bytes)
            try FS.rename(temp, path)
        } catch {
            try? FS.unlink(temp)
            throw error
        }
    }
}
