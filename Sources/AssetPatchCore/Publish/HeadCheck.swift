import Glibc

/// What `assetpatch verify` checks of a format-2 head beside a repository's archive: every index
/// page against its reference, the files it lists against the format-1 manifest's (same paths,
/// sizes, hashes and locations), and every chunk of every chunked file decoded from its stored
/// bytes (a linked file's after the bytes before it) and checked against its sha256 — what a
/// client rebuilding the file relies on.
package enum HeadCheck {
    package struct Result {
        package var files: Int
        package var chunkedFiles: Int
        package var chunks: Int
        package var pages: Int
    }

    package static func verify(_ head: Manifest, archive path: String, formatOneFiles: [ManifestFile]?, source: String) throws -> Result {
        guard head.kind == .format2, let index = head.index else { throw AssetPatchError(.manifest, "\(source): not a format-2 head") }
        var pages = 0
        let file = try File.openRead(path)
        let size = try file.size()
        let load: IndexReader.Loader = { refs in
            pages += refs.count
            return try refs.map { ref, offset in
                guard offset <= size, UInt64(ref.compressedSize) <= size - offset else {
                    throw AssetPatchError(.integrity, "\(path): an index page lies past the archive's end")
                }
                return try IndexPage.unseal(try file.preadExactly(Int(ref.compressedSize), at: offset, what: "index page"), ref, source: path)
            }
        }
        let (indexed, chunkLists) = try IndexReader.walk(index, source: source, strict: true, load: load)
        let files = indexed.files
        try Manifest.checkIndexedFiles(files, head, source: source)
        // The group page: decoded, its runs covering the files, its counts what they add up to.
        if let ref = index.groups, let at = index.groupsOffset {
            let table = try GroupTable.decode(try load([(ref, at)])[0], files: files.count, source: source)
            var numbered = files
            for i in numbered.indices { numbered[i].group = table.fileGroups[i] }
            try table.check(numbered, source: source)
        }
        if let formatOneFiles {
            let listed = formatOneFiles.filter { $0.path != IndexLocation.entryName }
            guard listed == files else {
                let a = Set(listed.map(\.path)), b = Set(files.map(\.path))
                let differing = a.symmetricDifference(b).sorted().first
                    ?? zip(listed, files).first { $0 != $1 }.map(\.0.path) ?? "the order"
                throw AssetPatchError(.manifest, "\(source): the index and manifest.json disagree (first at \(differing))")
            }
        }
        var chunks = 0
        for c in indexed.chunked {
            let f = files[c.file], linked = c.linked
            guard let list = chunkLists[f.path], let l = f.location else { continue }
            var offset = l.dataOffset
            // A linked file's chunk decodes after the 32 KiB before it.
            var history: [UInt8] = []
            for c in list {
                let n = Int(c.compressedSize)
                let stored = try file.preadExactly(n, at: offset, what: "\(f.path): chunk \(chunks)")
                do {
                    let bytes = try stored.withUnsafeBytes { b in
                        try history.withUnsafeBytes { h in try ChunkDecoder.decode(b, method: l.method, chunk: c, history: linked ? h : nil) }
                    }
                    if linked { history = Array((history + bytes).suffix(ChunkDecoder.historyBytes)) }
                } catch {
                    throw AssetPatchError(.integrity, "\(path): \(f.path): the chunk at archive offset \(offset) does not decode to its index record (\(error))")
                }
                offset += UInt64(n)
                chunks += 1
            }
        }
        return Result(files: files.count, chunkedFiles: chunkLists.count, chunks: chunks, pages: pages)
    }
}
