import Glibc

extension Installer {
    /// Writes a chunked file into the staging release from its chunks, in order: each from a
    /// file on disk (an installed release's or the bundle's, at its offset) or from a fetched
    /// chunk, hashed as it is copied (a chunk that does not match its sha256 raises
    /// `DifferentialFallback`: the file on disk changed, or a fetched chunk was damaged), the
    /// whole file hashed too. Memory: one chunk at a time.
    func rebuild(_ f: ChunkedFile, to target: String, chunks fetched: [String: String], progress: (UInt64) -> Void) throws {
        let out = try File.open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o444)
        let whole = try Digest(.sha256)
        var written: UInt64 = 0
        var open: [String: File] = [:]
        var buffer = [UInt8](repeating: 0, count: IndexPage.maxChunkBytes)
        for (record, source) in f.chunks {
            try cancel.check()
            let size = Int(record.size)
            let path: String, offset: UInt64
            switch source {
            case let .local(p, o): (path, offset) = (p, o)
            case let .fetched(p): (path, offset) = (p, 0)
            case .archive:
                guard let p = fetched[Hex.encode(record.sha256)] else {
                    throw AssetPatchError(.internal, "a chunk of \"\(f.file.path)\" was planned but not fetched")
                }
                (path, offset) = (p, 0)
            }
            let mismatch = DifferentialFallback(message: "\(path): the chunk at \(offset) of \(size) bytes no longer matches its sha256, expected for \"\(f.file.path)\"")
            if open[path] == nil {
                guard let file = try? File.openRead(path) else { throw mismatch }
                if open.count > 16 { open.removeAll() }
                open[path] = file
            }
            let n = try buffer.withUnsafeMutableBytes { b in
                try open[path]!.pread(into: UnsafeMutableRawBufferPointer(rebasing: b[0..<size]), at: offset)
            }
            guard n == size else { throw mismatch }
            let d = try Digest(.sha256)
            try buffer.withUnsafeBytes { b in
                let chunk = UnsafeRawBufferPointer(rebasing: b[0..<size])
                d.update(chunk)
                guard d.finalBytes() == record.sha256 else { throw mismatch }
                try out.pwrite(chunk, at: written)
                whole.update(chunk)
            }
            written += UInt64(size)
            progress(written)
        }
        out.startWriteback()
        let sha = whole.finalHex()
        guard written == f.file.size, sha == f.file.sha256 else {
            throw AssetPatchError(.integrity, "\(target): rebuilt from its chunks, \"\(f.file.path)\" has sha256 \(sha) (\(written) bytes), the index says \(f.file.sha256) (\(f.file.size))")
        }
    }
}
